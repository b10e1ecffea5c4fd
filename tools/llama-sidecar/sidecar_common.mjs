// What every tools/llama-sidecar script shares: failing with a message on stderr (tailor runs
// them as child processes and reports their last stderr lines), the pinned node-llama-cpp's
// version, and importing it with an error that says how to install it.

import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

// A fail(message) for script `name`: prints "name: message" on stderr and exits 1.
export function makeFail(name) {
  return (message) => {
    process.stderr.write(`${name}: ${message}\n`);
    process.exit(1);
  };
}

// The installed node-llama-cpp's version, or null when its package.json cannot be read.
export function packageVersion() {
  const here = dirname(fileURLToPath(import.meta.url));
  try {
    const path = join(here, "node_modules/node-llama-cpp/package.json");
    return JSON.parse(readFileSync(path, "utf8")).version;
  } catch {
    return null;
  }
}

// The node-llama-cpp module; fails (through `fail`) when it is not installed.
export async function importLlama(fail) {
  try {
    return await import("node-llama-cpp");
  } catch (e) {
    fail(`node-llama-cpp is not installed (run deploy/install-deps.sh): ${e.message}`);
  }
}
