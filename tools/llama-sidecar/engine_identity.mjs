#!/usr/bin/env node
// What llama.cpp engine this machine serves with, as node-llama-cpp reports it:
//
//   node engine_identity.mjs
//
// prints one JSON object:
//   {"node_llama_cpp": "3.21.1", "llama_cpp": "<release>", "build": "prebuilt",
//    "cpu_features": "SSE3 = 1 | ... "}
// A profiler agent started with --engine llama.cpp registers this identity (the package
// version is the engine version contracts name; the release and build are reported with
// every measurement). Loading the backend here also proves the prebuilt binaries run on this
// CPU before the agent offers any job. Exits 1 with a message on stderr on any failure.

import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

function fail(message) {
  process.stderr.write(`engine_identity: ${message}\n`);
  process.exit(1);
}

function packageVersion() {
  const here = dirname(fileURLToPath(import.meta.url));
  const path = join(here, "node_modules/node-llama-cpp/package.json");
  try {
    return JSON.parse(readFileSync(path, "utf8")).version;
  } catch (e) {
    fail(`cannot read ${path}: ${e.message}`);
  }
}

async function main() {
  let llamaModule;
  try {
    llamaModule = await import("node-llama-cpp");
  } catch (e) {
    fail(`node-llama-cpp is not installed (run deploy/install-deps.sh): ${e.message}`);
  }
  const { getLlama, LlamaLogLevel } = llamaModule;
  const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
  const info = String(llama.systemInfo ?? "");
  const cpu = info.startsWith("CPU : ") ? info.slice(6) : info;
  const out = {
    node_llama_cpp: packageVersion(),
    llama_cpp: llama.llamaCppRelease?.release ?? "unknown",
    build: llama.buildType ?? "unknown",
    cpu_features: cpu.trim(),
  };
  process.stdout.write(JSON.stringify(out) + "\n");
  await llama.dispose();
}

main().catch((e) => fail(e?.stack ?? String(e)));
