#!/usr/bin/env node
// Next-token log-probabilities of a GGUF model in llama.cpp (node-llama-cpp, pinned 3.21.1).
//
//   node next_token_logprobs.mjs --model M.gguf --tokens 5,17,33 [--positions 0,2] [--threads N]
//
// Evaluates the token ids in one sequence and prints one JSON object on stdout:
//   {"vocab_size": V, "positions": [...], "logprobs": [[V numbers], ...],
//    "node_llama_cpp": "3.21.1", "llama_cpp": "<release>"}
// where logprobs[i] is log P(next token | tokens[0..positions[i]]) over the whole vocabulary
// (default: every position). Exits 1 with a message on stderr on any failure; tailor runs it
// as a child process because llama.cpp aborts the process (GGML_ASSERT) on some models.
//
// Exact comparisons need: the CPU backend, an F32 KV cache (the default F16 cache moves
// log-probabilities by ~2e-3) and no flash attention. Probabilities come from greedy
// sampling (temperature 0), which leaves the logits untouched; node-llama-cpp softmaxes them
// in float32.

import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

function fail(message) {
  process.stderr.write(`next_token_logprobs: ${message}\n`);
  process.exit(1);
}

function parseArgs(argv) {
  const args = { threads: 1 };
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i], value = argv[i + 1];
    if (value === undefined) fail(`${key}: missing value`);
    if (key === "--model") args.model = value;
    else if (key === "--tokens") args.tokens = parseIds(key, value);
    else if (key === "--positions") args.positions = parseIds(key, value);
    else if (key === "--threads") args.threads = Number(value);
    else fail(`unknown flag ${key} (flags: --model --tokens --positions --threads)`);
  }
  if (!args.model) fail("--model is required");
  if (!args.tokens || args.tokens.length === 0) fail("--tokens is required (comma-separated ids)");
  if (!Number.isInteger(args.threads) || args.threads < 1) fail("--threads: a positive integer");
  args.positions ??= args.tokens.map((_, i) => i);
  for (const p of args.positions) {
    if (p >= args.tokens.length) {
      fail(`--positions: ${p} is past the last token (${args.tokens.length - 1})`);
    }
  }
  return args;
}

function parseIds(flag, text) {
  return text.split(",").filter((s) => s !== "").map((s) => {
    const n = Number(s);
    if (!Number.isInteger(n) || n < 0) fail(`${flag}: "${s}" is not a non-negative integer`);
    return n;
  });
}

function packageVersion() {
  const here = dirname(fileURLToPath(import.meta.url));
  try {
    const path = join(here, "node_modules/node-llama-cpp/package.json");
    const pkg = JSON.parse(readFileSync(path, "utf8"));
    return pkg.version;
  } catch {
    return "unknown";
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  let llamaModule;
  try {
    llamaModule = await import("node-llama-cpp");
  } catch (e) {
    fail(`node-llama-cpp is not installed (run deploy/install-deps.sh): ${e.message}`);
  }
  const { getLlama, LlamaLogLevel } = llamaModule;
  // Prebuilt CPU binaries only: never build or download at run time.
  const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
  const model = await llama.loadModel({ modelPath: args.model, gpuLayers: 0 });
  const n = args.tokens.length;
  const context = await model.createContext({
    contextSize: Math.max(n + 1, 64),
    batchSize: Math.max(n, 1),
    sequences: 1,
    threads: args.threads,
    flashAttention: false,
    experimentalKvCacheKeyType: "F32",
    experimentalKvCacheValueType: "F32",
  });
  const sequence = context.getSequence();
  const wanted = new Set(args.positions);
  const input = args.tokens.map((t, i) =>
    wanted.has(i)
      ? [t, { generateNext: { probabilities: true, options: { temperature: 0 } } }]
      : t);
  const results = await sequence.controlledEvaluate(input);
  // Greedy sampling keeps every candidate, so each map covers the whole vocabulary.
  const nVocab = results[args.positions[0]]?.next?.probabilities?.size ?? 0;
  const logprobs = args.positions.map((p) => {
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
  const out = {
    vocab_size: nVocab,
    positions: args.positions,
    logprobs,
    node_llama_cpp: packageVersion(),
    llama_cpp: llama.llamaCppRelease?.release ?? "unknown",
  };
  process.stdout.write(JSON.stringify(out) + "\n");
  await context.dispose();
  await model.dispose();
  await llama.dispose();
}

main().catch((e) => fail(e?.stack ?? String(e)));
