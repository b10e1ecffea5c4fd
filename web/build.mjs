// Bundles src/dashboard.js (with Chart.js) into DIST/dashboard.js and copies the styles.
//   node build.mjs SRC_DIR DIST_DIR     (run in the directory that holds node_modules)
// CMake runs it in the build directory, so packages resolve from there, never from web/.
import { copyFileSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const [srcDir, distDir] = process.argv.slice(2);
if (!srcDir || !distDir) {
  console.error('usage: node build.mjs SRC_DIR DIST_DIR');
  process.exit(2);
}
const modules = path.join(process.cwd(), 'node_modules');
const require = createRequire(path.join(process.cwd(), 'package.json'));
const esbuild = require('esbuild');

mkdirSync(distDir, { recursive: true });
esbuild.buildSync({
  entryPoints: [path.join(srcDir, 'dashboard.js')],
  outfile: path.join(distDir, 'dashboard.js'),
  bundle: true,
  minify: true,
  format: 'iife',
  target: 'es2019',
  nodePaths: [modules],
  legalComments: 'eof',
  logLevel: 'warning',
});
copyFileSync(path.join(srcDir, 'dashboard.css'), path.join(distDir, 'dashboard.css'));
