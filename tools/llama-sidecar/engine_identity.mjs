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

import { importLlama, makeFail, packageVersion } from "./sidecar_common.mjs";

const fail = makeFail("engine_identity");

async function main() {
  const { getLlama, LlamaLogLevel } = await importLlama(fail);
  const version = packageVersion();
  if (version === null) fail("cannot read node_modules/node-llama-cpp/package.json");
  const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
  const info = String(llama.systemInfo ?? "");
  const cpu = info.startsWith("CPU : ") ? info.slice(6) : info;
  const out = {
    node_llama_cpp: version,
    llama_cpp: llama.llamaCppRelease?.release ?? "unknown",
    build: llama.buildType ?? "unknown",
    cpu_features: cpu.trim(),
  };
  process.stdout.write(JSON.stringify(out) + "\n");
  await llama.dispose();
}

main().catch((e) => fail(e?.stack ?? String(e)));
