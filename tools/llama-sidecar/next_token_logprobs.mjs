#!/usr/bin/env node
// Next-token log-probabilities of a GGUF model in llama.cpp (node-llama-cpp, pinned 3.21.1).
//
//   node next_token_logprobs.mjs --model M.gguf --tokens 5,17,33 [--positions 0,2] [--threads N]
//   node next_token_logprobs.mjs --model M.gguf --batch [--threads N] < request.json
//
// One prompt (--tokens): evaluates the token ids in one sequence and prints one JSON object:
//   {"vocab_size": V, "positions": [...], "logprobs": [[V numbers], ...],
//    "node_llama_cpp": "3.21.1", "llama_cpp": "<release>"}
// where logprobs[i] is log P(next token | tokens[0..positions[i]]) over the whole vocabulary
// (default: every position).
//
// Many prompts (--batch): the model is loaded once (most of a small model's run time) and the
// request on stdin, {"prompts": [{"tokens": [...], "positions": [...]}, ...]} (positions
// optional), is answered with
//   {"vocab_size": V, "results": [{"positions": [...], "logprobs": [...]}, ...],
//    "node_llama_cpp": "3.21.1", "llama_cpp": "<release>"}
// one result per prompt, in order. Each prompt gets a context of its own, created exactly as
// the one-prompt path creates it: nothing (KV cache, recurrent state, checkpoints) carries
// over from an earlier prompt, and a prompt's numbers do not depend on the batch it is in.
//
// Exits 1 with a message on stderr on any failure; tailor runs it as a child process because
// llama.cpp aborts the process (GGML_ASSERT) on some models.
//
// Exact comparisons need: the CPU backend, an F32 KV cache (the default F16 cache moves
// log-probabilities by ~2e-3) and no flash attention. Probabilities come from greedy
// sampling (temperature 0), which leaves the logits untouched; node-llama-cpp softmaxes them
// in float32.

import { readFileSync } from "node:fs";
import { importLlama, makeFail, packageVersion } from "./sidecar_common.mjs";

const fail = makeFail("next_token_logprobs");

function parseArgs(argv) {
  const args = { threads: 1, batch: false };
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i], value = argv[i + 1];
    if (key === "--batch") {
      args.batch = true;
      --i;  // a flag without a value
      continue;
    }
    if (value === undefined) fail(`${key}: missing value`);
    if (key === "--model") args.model = value;
    else if (key === "--tokens") args.tokens = parseIds(key, value);
    else if (key === "--positions") args.positions = parseIds(key, value);
    else if (key === "--threads") args.threads = Number(value);
    else fail(`unknown flag ${key} (flags: --model --tokens --positions --batch --threads)`);
  }
  if (!args.model) fail("--model is required");
  if (!Number.isInteger(args.threads) || args.threads < 1) fail("--threads: a positive integer");
  if (args.batch) {
    if (args.tokens || args.positions) fail("--batch reads its prompts from stdin, not --tokens");
    args.prompts = readBatchRequest();
  } else {
    if (!args.tokens || args.tokens.length === 0) {
      fail("--tokens is required (comma-separated ids), or --batch");
    }
    args.prompts = [checkPrompt("--positions", args.tokens, args.positions)];
  }
  return args;
}

function parseIds(flag, text) {
  return text.split(",").filter((s) => s !== "").map((s) => checkId(flag, Number(s), s));
}

function checkId(what, n, text) {
  if (!Number.isInteger(n) || n < 0) fail(`${what}: "${text}" is not a non-negative integer`);
  return n;
}

// A prompt with its positions defaulted (every position) and checked.
function checkPrompt(what, tokens, positions) {
  if (tokens.length === 0) fail(`${what}: no tokens`);
  positions ??= tokens.map((_, i) => i);
  for (const p of positions) {
    if (p >= tokens.length) {
      fail(`${what}: position ${p} is past the last token (${tokens.length - 1})`);
    }
  }
  return { tokens, positions };
}

// {"prompts": [{"tokens": [ids], "positions": [ids]?}, ...]} from stdin.
function readBatchRequest() {
  let request;
  try {
    request = JSON.parse(readFileSync(0, "utf8"));
  } catch (e) {
    fail(`--batch: stdin is not a JSON request: ${e.message}`);
  }
  if (!Array.isArray(request?.prompts) || request.prompts.length === 0) {
    fail('--batch: the request needs "prompts": [{"tokens": [...]}, ...]');
  }
  return request.prompts.map((p, i) => {
    const what = `prompt ${i}`;
    if (!Array.isArray(p?.tokens)) fail(`${what}: "tokens" must be an array of ids`);
    if (p.positions !== undefined && !Array.isArray(p.positions)) {
      fail(`${what}: "positions" must be an array of ids`);
    }
    const ids = (list) => list.map((n) => checkId(what, n, String(n)));
    const positions = p.positions === undefined ? undefined : ids(p.positions);
    return checkPrompt(what, ids(p.tokens), positions);
  });
}

// log P(next | prompt prefix) at each of the prompt's positions, in a context of its own.
async function evaluatePrompt(model, prompt, threads) {
  const n = prompt.tokens.length;
  const context = await model.createContext({
    contextSize: Math.max(n + 1, 64),
    batchSize: Math.max(n, 1),
    sequences: 1,
    threads,
    flashAttention: false,
    experimentalKvCacheKeyType: "F32",
    experimentalKvCacheValueType: "F32",
  });
  try {
    const sequence = context.getSequence();
    const wanted = new Set(prompt.positions);
    const input = prompt.tokens.map((t, i) =>
      wanted.has(i)
        ? [t, { generateNext: { probabilities: true, options: { temperature: 0 } } }]
        : t);
    const results = await sequence.controlledEvaluate(input);
    // Greedy sampling keeps every candidate, so each map covers the whole vocabulary.
    const nVocab = results[prompt.positions[0]]?.next?.probabilities?.size ?? 0;
    const logprobs = prompt.positions.map((p) => {
      const probs = results[p]?.next?.probabilities;
      if (!probs) fail(`no probabilities returned for position ${p}`);
      if (probs.size !== nVocab) {
        fail(`position ${p}: ${probs.size} probabilities, expected ${nVocab}`);
      }
      const row = new Array(nVocab).fill(null);
      for (const [token, prob] of probs) {
        if (token >= 0 && token < nVocab) row[token] = Math.log(prob);
      }
      // JSON has no -Infinity; a probability that underflowed float32 is reported as null.
      return row.map((x) => (x === null || !Number.isFinite(x) ? null : x));
    });
    return { vocab_size: nVocab, positions: prompt.positions, logprobs };
  } finally {
    await context.dispose();
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const { getLlama, LlamaLogLevel } = await importLlama(fail);
  // Prebuilt CPU binaries only: never build or download at run time.
  const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
  const model = await llama.loadModel({ modelPath: args.model, gpuLayers: 0 });
  const results = [];
  for (const prompt of args.prompts) {
    results.push(await evaluatePrompt(model, prompt, args.threads));
  }
  const versions = {
    node_llama_cpp: packageVersion() ?? "unknown",
    llama_cpp: llama.llamaCppRelease?.release ?? "unknown",
  };
  const out = args.batch
    ? {
        vocab_size: results[0].vocab_size,
        results: results.map(({ positions, logprobs }) => ({ positions, logprobs })),
        ...versions,
      }
    : { ...results[0], ...versions };
  process.stdout.write(JSON.stringify(out) + "\n");
  await model.dispose();
  await llama.dispose();
}

main().catch((e) => fail(e?.stack ?? String(e)));
