// `npm run package [-- <destination folder>]`: the tarball a Kong node installs with
// `npm install -g ./kong-lora-router-<version>.tgz`. kong-pdk 0.6.0 lists typescript, ts-node and
// @types/node as dependencies (ts-node compiles .ts plugins at start): installed from the
// registry they are 65 of the 84 MB, and the plugins are compiled JavaScript. So the tarball
// bundles kong-pdk (bundleDependencies: npm installs a bundle as it is, never resolving its
// dependencies again) with what it runs: its files as published, unchanged, commander and
// node-color-log from this checkout's lockfile, @msgpack/msgpack beside it, and for ts-node a
// stand-in whose register() does nothing (scripts/pack/ts-node). The other dependencies come
// from the registry. Plain `npm pack` here is refused (prepack): it would bundle nothing and
// install TypeScript on the Kong node.
const { execFileSync } = require('node:child_process');
const { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } = require('node:fs');
const { tmpdir } = require('node:os');
const { dirname, join, resolve } = require('node:path');

const ROOT = join(__dirname, '..');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const destination = resolve(process.argv[2] ?? '.');
const root = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
const pdkDir = dirname(require.resolve('kong-pdk/package.json', { paths: [ROOT] }));
const pdk = JSON.parse(readFileSync(join(pdkDir, 'package.json'), 'utf8'));

// What becomes of each of kong-pdk's dependencies: a change in kong-pdk's list stops the pack.
const BUNDLED = ['commander', 'node-color-log']; // required by cli.js and the server's logger
const STAND_IN = ['ts-node']; // lib/mod.js calls require('ts-node').register() at load
const COMPILER_ONLY = ['typescript', '@types/node']; // ts-node's compiler and its Node types
// A dependency of this package too, bundled beside kong-pdk: npm takes a bundled package's
// dependencies for part of the bundle, and left its folder empty when the registry's was meant.
const OURS = ['@msgpack/msgpack'];
for (const dep of Object.keys(pdk.dependencies)) {
  if (![...BUNDLED, ...STAND_IN, ...COMPILER_ONLY, ...OURS].includes(dep))
    throw new Error(`kong-pdk ${pdk.version} depends on ${dep}: decide in scripts/pack.js how to ship it`);
}
for (const dep of OURS)
  if (!root.dependencies[dep]) throw new Error(`kong-pdk needs ${dep}, which package.json does not list`);

/** A package's folder as kong-pdk's require() finds it: beside kong-pdk's own, else higher up. */
function packageDir(name) {
  for (let dir = pdkDir; dir !== dirname(dir); dir = dirname(dir)) {
    const candidate = join(dir, 'node_modules', name);
    if (existsSync(join(candidate, 'package.json'))) return candidate;
  }
  throw new Error(`${name} (a dependency of kong-pdk) is not installed: run npm ci`);
}

/** A package's files as npm installed them (published files, licence included), no node_modules. */
function copyPackage(from, to) {
  cpSync(from, to, {
    recursive: true,
    dereference: true,
    filter: (src) => !src.slice(from.length).split(/[\\/]/).includes('node_modules'),
  });
}

execFileSync(npm, ['run', 'build:runtime'], { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'] });

const stage = mkdtempSync(join(tmpdir(), 'kong-lora-router-pack-'));
try {
  const manifest = {
    ...Object.fromEntries(
      ['name', 'version', 'description', 'license', 'private', 'engines', 'bin', 'files'].map((k) => [
        k,
        root[k],
      ]),
    ),
    dependencies: root.dependencies,
    bundleDependencies: ['kong-pdk', ...OURS],
  };
  writeFileSync(join(stage, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  for (const f of ['README.md', 'LICENSE', 'bin', 'lib'])
    cpSync(join(ROOT, f), join(stage, f), { recursive: true });
  // Both generations' kong.conf lines, as the Docker image runs them (docker/ is their source).
  cpSync(join(ROOT, 'docker', 'kong.conf'), join(stage, 'examples', 'kong.conf'));
  cpSync(join(ROOT, 'docker', 'kong-3.9.conf'), join(stage, 'examples', 'kong-3.9.conf'));

  const bundle = join(stage, 'node_modules', 'kong-pdk');
  copyPackage(pdkDir, bundle);
  for (const dep of BUNDLED) copyPackage(packageDir(dep), join(bundle, 'node_modules', dep));
  for (const dep of OURS) {
    const from = packageDir(dep);
    const { version } = JSON.parse(readFileSync(join(from, 'package.json'), 'utf8'));
    if (version !== root.dependencies[dep])
      throw new Error(`${dep} ${version} installed, package.json pins ${root.dependencies[dep]}: run npm ci`);
    copyPackage(from, join(stage, 'node_modules', dep));
  }
  for (const dep of STAND_IN)
    cpSync(join(__dirname, 'pack', dep), join(bundle, 'node_modules', dep), { recursive: true });

  const out = execFileSync(npm, ['pack', '--pack-destination', destination, '--ignore-scripts'], {
    cwd: stage,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  process.stdout.write(out);
} finally {
  rmSync(stage, { recursive: true, force: true });
}
