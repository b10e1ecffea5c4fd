#!/usr/bin/env node
// Token ids of texts in llama.cpp's tokenizer (node-llama-cpp, pinned 3.21.1), from the
// tokenizer.ggml.* metadata of a GGUF (only the vocabulary is loaded, not the weights).
//
//   node tokenize.mjs --model M.gguf < request.json
//
// request: {"texts": ["...", ...], "parse_special": true|false}
// prints:  {"ids": [[...], ...], "node_llama_cpp": "3.21.1", "llama_cpp": "<release>"}
// one id list per text, in order; no BOS/EOS is added (llama_tokenize with add_special false);
// with parse_special, control tokens written in a text become those tokens.
//
// Exits 1 with a message on stderr on any failure (tailor runs it as a child process).

import { readFileSync } from "node:fs";
import { importLlama, makeFail, packageVersion } from "./sidecar_common.mjs";

const fail = makeFail("tokenize");

function parseArgs(argv) {
  const args = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (argv[i + 1] === undefined) fail(`${argv[i]}: missing value`);
    if (argv[i] === "--model") args.model = argv[i + 1];
    else fail(`unknown flag ${argv[i]} (flags: --model)`);
  }
  if (!args.model) fail("--model is required");
  let request;
  try {
    request = JSON.parse(readFileSync(0, "utf8"));
  } catch (e) {
    fail(`stdin is not a JSON request: ${e.message}`);
  }
  if (!Array.isArray(request.texts) || !request.texts.every((t) => typeof t === "string")) {
    fail('request: "texts" must be an array of strings');
  }
  args.texts = request.texts;
  args.parseSpecial = request.parse_special === true;
  return args;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const { getLlama, LlamaLogLevel } = await importLlama(fail);
  const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
  const model = await llama.loadModel({ modelPath: args.model, gpuLayers: 0, vocabOnly: true });
  const ids = args.texts.map((t) => Array.from(model.tokenize(t, args.parseSpecial)));
  process.stdout.write(JSON.stringify({
    ids,
    node_llama_cpp: packageVersion() ?? "unknown",
    llama_cpp: llama.llamaCppRelease?.release ?? "unknown",
  }) + "\n");
  await model.dispose();
  await llama.dispose();
}

main().catch((e) => fail(e?.stack ?? String(e)));
