// Bundles the chat page (src/main.jsx) into dist/app.js with esbuild, and writes the licence
// notices of every package the bundle includes into dist/THIRD_PARTY_NOTICES.txt.
//
//   node build.mjs           rebuild dist/ (after `npm ci`)
//   node build.mjs --check   rebuild in memory and fail if dist/ differs
//
// The bundle's first line records a SHA-256 of the sources (this script, package.json,
// package-lock.json and src/), so a test can tell a stale bundle without Node: see
// `sourcesDigest` and mesh-egress/tests/web_bundle.rs, which hash the same bytes.
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync, writeFileSync, existsSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const here = dirname(fileURLToPath(import.meta.url));
const check = process.argv.includes('--check');

/** The files the bundle is built from, relative to this folder, sorted. */
function sources() {
  const src = readdirSync(join(here, 'src'))
    .filter((name) => !name.startsWith('.'))
    .map((name) => `src/${name}`);
  return ['build.mjs', 'package.json', 'package-lock.json', ...src].sort();
}

/** SHA-256 over each source as `path NUL contents NUL`, in order. */
function sourcesDigest() {
  const hash = createHash('sha256');
  for (const path of sources()) {
    hash.update(path);
    hash.update('\0');
    hash.update(readFileSync(join(here, path)));
    hash.update('\0');
  }
  return hash.digest('hex');
}

/** `node_modules/<name>` (or `node_modules/@scope/name`) of a bundled input, if any. */
function packageDir(input) {
  const at = input.lastIndexOf('node_modules/');
  if (at < 0) {
    return null;
  }
  const rest = input.slice(at + 'node_modules/'.length).split('/');
  const name = rest[0].startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0];
  return input.slice(0, at) + `node_modules/${name}`;
}

function notices(metafile) {
  const dirs = new Set();
  for (const input of Object.keys(metafile.inputs)) {
    const dir = packageDir(input);
    if (dir) {
      dirs.add(dir);
    }
  }
  const entries = [...dirs].map((dir) => {
    const manifest = JSON.parse(readFileSync(join(here, dir, 'package.json'), 'utf8'));
    const file = readdirSync(join(here, dir)).find((name) => /^licen[cs]e(\.|$)/i.test(name));
    const text = file ? readFileSync(join(here, dir, file), 'utf8').trim() : null;
    return { name: manifest.name, version: manifest.version, license: manifest.license, text };
  });
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const lines = [
    'Third-party software bundled into app.js (the mesh-egress web example page).',
    'Each package is listed with its version, its declared licence and its licence text.',
    '',
  ];
  for (const entry of entries) {
    lines.push('='.repeat(78));
    lines.push(`${entry.name} ${entry.version} (${entry.license ?? 'no licence field'})`);
    lines.push('='.repeat(78));
    lines.push(entry.text ?? `No licence file is shipped; its package.json declares: ${entry.license}.`);
    lines.push('');
  }
  return lines.join('\n');
}

const digest = sourcesDigest();
const result = await esbuild.build({
  absWorkingDir: here,
  entryPoints: ['src/main.jsx'],
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['es2020'],
  jsx: 'automatic',
  define: { 'process.env.NODE_ENV': '"production"' },
  legalComments: 'none',
  banner: {
    js: `/* mesh-egress web example page; sources-sha256: ${digest}; licences: THIRD_PARTY_NOTICES.txt */`,
  },
  metafile: true,
  write: false,
  outfile: 'dist/app.js',
  logLevel: 'warning',
});

const built = new Map();
for (const file of result.outputFiles) {
  built.set(relative(here, file.path), file.text);
}
built.set('dist/THIRD_PARTY_NOTICES.txt', notices(result.metafile));

if (check) {
  const stale = [...built].filter(
    ([path, text]) => !existsSync(join(here, path)) || readFileSync(join(here, path), 'utf8') !== text,
  );
  if (stale.length > 0) {
    console.error(`stale: ${stale.map(([path]) => path).join(', ')} (run: node build.mjs)`);
    process.exit(1);
  }
  console.log('dist/ is up to date');
} else {
  for (const [path, text] of built) {
    writeFileSync(join(here, path), text);
  }
  console.log(`built dist/ (sources-sha256 ${digest})`);
}
