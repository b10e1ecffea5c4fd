#!/usr/bin/env node
// Serving cost of a GGUF model in llama.cpp (node-llama-cpp, pinned 3.21.1) under a workload.
//
//   node serve_benchmark.mjs --model M.gguf --batch-size B --input I --output O [--prefix P]
//       [--threads T] [--warmup W] [--repetitions R] [--seed S] [--kv-type f16|f32]
//
// One context with B sequences, each holding at least P + I + O cells (padded, see
// kv_cache_cells), its batch big enough for B * I tokens. A request: every sequence
// starts from a clean state, evaluates P prefix tokens (untimed: a cached prefix), then, timed,
// all B sequences at once (node-llama-cpp batches them into one decode) evaluate I input
// tokens and generate exactly O tokens greedily: the prefill decode yields the first, O - 1
// single-token decodes the rest (the last generated token is not evaluated). An end-of-
// generation token does not stop a sequence (random weights produce them often). W requests
// are run unrecorded, then R recorded. Prints one JSON object:
//   {"request_ms": [R], "prefill_ms": [R], "decode_ms": [R], "cpu_ms": [R], "eog_tokens": N,
//    "weights_bytes": N, "state_bytes": N, "compute_buffer_bytes": N, "context_buffer_bytes": N,
//    "kv_cache_cells": N, "rss_before_load_bytes": N, "rss_peak_bytes": N,
//    "threads": T, "node_llama_cpp": "3.21.1", "llama_cpp": "<release>"}
// prefill_ms runs until every sequence has its first token, decode_ms is the rest of the
// request; cpu_ms is this process's user + system CPU time over the request (for telling
// interference: well over request_ms * threads means other threads worked too); eog_tokens
// counts the end-of-generation tokens the recorded requests generated and went on past.
// Memory as llama.cpp reports it:
//   weights_bytes: llama_model_size, the sum of the GGUF tensors' data sizes;
//   state_bytes: llama_state_get_size after the last request: the SERIALIZED state, i.e. the
//     K and V rows of the cells in use (P + I + O - 1 per sequence: the last generated token
//     is never evaluated) plus per-cell and per-layer headers, not the allocated cache;
//   compute_buffer_bytes: the sum of llama.cpp's "CPU compute buffer size = X MiB" log lines
//     (printed to a logger at info level only; MiB with two decimals, so +-5243 bytes each);
//   context_buffer_bytes: exact, the allocated KV cache plus the compute buffers;
//   kv_cache_cells: the KV cells allocated over all sequences (the "n_ctx" log line): each
//     sequence gets its own stream of the per-sequence cells padded up to a multiple of 256,
//     so the allocated KV cache is layers x 2 x kv_heads x head_dim x kv_cache_cells x the
//     KV type's bytes (context_buffer_bytes minus the compute buffers).
// rss_* are VmRSS before the model load and VmHWM at the end, from /proc/self/status.
//
// Exits 1 with a message on stderr on any failure; tailor runs it as a child process because
// llama.cpp aborts the process (GGML_ASSERT) on some models.

import { readFileSync } from "node:fs";
import { importLlama, makeFail, packageVersion } from "./sidecar_common.mjs";

const fail = makeFail("serve_benchmark");

const kIntFlags = {
  "--batch-size": ["batchSize", 1],
  "--input": ["input", 1],
  "--output": ["output", 1],
  "--prefix": ["prefix", 0],
  "--threads": ["threads", 1],
  "--warmup": ["warmup", 0],
  "--repetitions": ["repetitions", 1],
};

function parseArgs(argv) {
  const args = { prefix: 0, threads: 1, warmup: 1, repetitions: 5, seed: 1n, kvType: "f16" };
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i], value = argv[i + 1];
    if (value === undefined) fail(`${key}: missing value`);
    if (key === "--model") {
      args.model = value;
    } else if (key === "--kv-type") {
      if (value !== "f16" && value !== "f32") fail(`--kv-type: "${value}" is not f16 or f32`);
      args.kvType = value;
    } else if (key === "--seed") {
      // Any uint64 (BigInt: a Number loses the low bits past 2^53).
      if (!/^\d+$/.test(value) || BigInt(value) >= 1n << 64n) {
        fail(`--seed: "${value}" is not a uint64`);
      }
      args.seed = BigInt(value);
    } else if (key in kIntFlags) {
      const [name, min] = kIntFlags[key];
      const n = Number(value);
      if (!Number.isSafeInteger(n) || n < min) {
        fail(`${key}: "${value}" is not an integer >= ${min}`);
      }
      args[name] = n;
    } else {
      const flags = ["--model", ...Object.keys(kIntFlags), "--seed", "--kv-type"].join(" ");
      fail(`unknown flag ${key} (flags: ${flags})`);
    }
  }
  if (!args.model) fail("--model is required");
  for (const flag of ["--batch-size", "--input", "--output"]) {
    if (args[kIntFlags[flag][0]] === undefined) fail(`${flag} is required`);
  }
  return args;
}

// A field of /proc/self/status in bytes (it reports kB).
function procStatusBytes(field) {
  const line = readFileSync("/proc/self/status", "utf8").split("\n")
    .find((l) => l.startsWith(`${field}:`));
  if (!line) fail(`no ${field} in /proc/self/status`);
  return Number(line.split(/\s+/)[1]) * 1024;
}

// llama.cpp's log lines, kept for the memory figures only it prints.
function logCollector() {
  const lines = [];
  const logger = (level, message) => lines.push(message);
  return { lines, logger };
}

function computeBufferBytes(lines) {
  let bytes = 0, found = false;
  for (const line of lines) {
    const m = /CPU compute buffer size =\s*([0-9.]+) MiB/.exec(line);
    if (m) {
      bytes += Math.round(Number(m[1]) * 1024 * 1024);
      found = true;
    }
  }
  if (!found) fail('llama.cpp logged no "CPU compute buffer size" line');
  return bytes;
}

// The context's cells over all sequences (llama_context's n_ctx after its padding).
function kvCacheCells(lines) {
  for (const line of lines) {
    const m = /llama_context: n_ctx\s*=\s*(\d+)/.exec(line);
    if (m) return Number(m[1]);
  }
  fail('llama.cpp logged no "llama_context: n_ctx" line');
}

// KV cache buffers plus compute buffers in host memory, exact: llama_context's
// memory_breakdown() (its context + compute parts) through node-llama-cpp's native handle,
// which 3.21.1 only uses internally.
function contextBufferBytes(context) {
  const breakdown = context._ctx?.getMemoryBreakdown?.();
  if (!Number.isSafeInteger(breakdown?.cpuRam)) fail("no memory breakdown from the context");
  return breakdown.cpuRam;
}

function vocabSize(lines) {
  for (const line of lines) {
    const m = /n_vocab\s*=\s*(\d+)/.exec(line);
    if (m) return Number(m[1]);
  }
  fail('llama.cpp logged no "n_vocab" line');
}

// splitmix64: deterministic prompt ids from the seed, the same on every platform.
function idGenerator(seed) {
  let x = seed;
  return () => {
    x = BigInt.asUintN(64, x + 0x9e3779b97f4a7c15n);
    let z = x;
    z = BigInt.asUintN(64, (z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n);
    z = BigInt.asUintN(64, (z ^ (z >> 27n)) * 0x94d049bb133111ebn);
    return z ^ (z >> 31n);
  };
}

// Per sequence: P prefix ids and I input ids, drawn from the non-special tokens of [0, vocab)
// (every token when the vocabulary has no ordinary one, as a dummy vocabulary may not).
function makePrompts(model, vocab, args) {
  let pool = [];
  for (let t = 0; t < vocab; ++t) if (!model.isSpecialToken(t)) pool.push(t);
  if (pool.length === 0) pool = Array.from({ length: vocab }, (_, t) => t);
  const next = idGenerator(args.seed);
  const draw = (n) => Array.from({ length: n }, () => pool[Number(next() % BigInt(pool.length))]);
  return Array.from({ length: args.batchSize }, () => ({
    prefix: draw(args.prefix),
    input: draw(args.input),
  }));
}

// Input ids then exactly `output` greedy tokens: the time of the first token and how many
// end-of-generation tokens went past.
async function generate(sequence, input, output) {
  let firstAt = 0, produced = 0, eog = 0;
  // yieldEogToken: an end-of-generation token is yielded and evaluated like any other.
  for await (const token of sequence.evaluate(input, { temperature: 0, yieldEogToken: true })) {
    if (produced === 0) firstAt = performance.now();
    if (sequence.model.isEogToken(token)) ++eog;
    if (++produced === output) break;
  }
  if (produced !== output) fail(`a sequence stopped after ${produced} of ${output} tokens`);
  return { firstAt, eog };
}

async function request(sequences, prompts, output) {
  for (let i = 0; i < sequences.length; ++i) {
    await sequences[i].clearHistory();
    if (prompts[i].prefix.length > 0) {
      await sequences[i].evaluateWithoutGeneratingNewTokens(prompts[i].prefix);
    }
  }
  const cpu = process.cpuUsage();
  const start = performance.now();
  const done = await Promise.all(sequences.map((s, i) => generate(s, prompts[i].input, output)));
  const end = performance.now();
  const used = process.cpuUsage(cpu);
  const prefillEnd = Math.max(...done.map((d) => d.firstAt));
  return {
    eog: done.reduce((sum, d) => sum + d.eog, 0),
    request_ms: end - start,
    prefill_ms: prefillEnd - start,
    decode_ms: end - prefillEnd,
    cpu_ms: (used.user + used.system) / 1000,
  };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const { getLlama, LlamaLogLevel } = await importLlama(fail);
  const log = logCollector();
  // Prebuilt CPU binaries only: never build or download at run time. Info level: the compute
  // buffer and KV cache sizes are info lines.
  const llama = await getLlama({
    gpu: false, build: "never", logLevel: LlamaLogLevel.info, logger: log.logger,
  });
  const rssBeforeLoad = procStatusBytes("VmRSS");
  const model = await llama.loadModel({ modelPath: args.model, gpuLayers: 0 });
  const perSequence = args.prefix + args.input + args.output;
  const kvType = args.kvType === "f32" ? "F32" : "F16";
  const context = await model.createContext({
    contextSize: perSequence,
    batchSize: Math.max(args.batchSize * args.input, args.batchSize * Math.max(args.prefix, 1)),
    sequences: args.batchSize,
    threads: args.threads,
    flashAttention: false,
    experimentalKvCacheKeyType: kvType,
    experimentalKvCacheValueType: kvType,
  });
  const sequences = Array.from({ length: args.batchSize }, () => context.getSequence());
  const prompts = makePrompts(model, vocabSize(log.lines), args);
  const samples = { request_ms: [], prefill_ms: [], decode_ms: [], cpu_ms: [] };
  let eogTokens = 0;
  for (let r = 0; r < args.warmup + args.repetitions; ++r) {
    const s = await request(sequences, prompts, args.output);
    if (r < args.warmup) continue;
    for (const key of Object.keys(samples)) samples[key].push(s[key]);
    eogTokens += s.eog;
  }
  const out = {
    ...samples,
    eog_tokens: eogTokens,
    weights_bytes: model.size,
    state_bytes: context.stateSize,
    compute_buffer_bytes: computeBufferBytes(log.lines),
    context_buffer_bytes: contextBufferBytes(context),
    kv_cache_cells: kvCacheCells(log.lines),
    rss_before_load_bytes: rssBeforeLoad,
    rss_peak_bytes: procStatusBytes("VmHWM"),
    threads: args.threads,
    node_llama_cpp: packageVersion() ?? "unknown",
    llama_cpp: llama.llamaCppRelease?.release ?? "unknown",
  };
  process.stdout.write(JSON.stringify(out) + "\n");
  await context.dispose();
  await model.dispose();
  await llama.dispose();
}

main().catch((e) => fail(e?.stack ?? String(e)));
