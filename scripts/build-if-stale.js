// `npm start`, `npm run demo`, `npm run sim`: build only when a source is newer than dist/, so
// a second start (or `--help`) does not wait for tsc. `npm run build` always builds.
// `--check` only reports: exit 1 and the newer file when a build is due, 0 otherwise.
//
// What is watched comes from the build itself, so it cannot drift from it: the `include` of
// tsconfig.build.json (and of what it extends), the config files, package-lock.json, and the
// source of every file the last build wrote to dist/ (files compiled only because an included
// one imports them).
const { readFileSync, readdirSync, statSync } = require('node:fs');
const { dirname, join, relative } = require('node:path');
const { spawnSync } = require('node:child_process');

const root = join(__dirname, '..');
const dist = join(root, 'dist');

/** The config file, the ones it extends, and the `include` in force (the nearest one). */
function readConfig(file) {
  const config = JSON.parse(readFileSync(file, 'utf8'));
  const parent = config.extends
    ? readConfig(join(dirname(file), config.extends))
    : { files: [], include: [] };
  const include = (config.include ?? parent.include).map((p) => join(dirname(file), p));
  return { files: [file, ...parent.files], include };
}

/** A glob's folder before its first wildcard (watching more than the glob only rebuilds more). */
function withoutGlob(p) {
  const i = p.search(/[*?]/);
  return i < 0 ? p : dirname(p.slice(0, i) + 'x');
}

/** The newest path under `path` (the path itself, files, folders): [mtime, path]. */
function newest(path) {
  const st = statSync(path, { throwIfNoEntry: false });
  if (!st) return [0, path];
  let best = [st.mtimeMs, path];
  if (st.isDirectory()) {
    for (const name of readdirSync(path)) {
      const n = newest(join(path, name));
      if (n[0] >= best[0]) best = n; // on a tie, name the file rather than its folder
    }
  }
  return best;
}

/** The sources of what the last build wrote: dist/a/b.js from a/b.ts (rootDir is the repository). */
function builtSources(dir) {
  const out = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...builtSources(path));
    else if (entry.name.endsWith('.js')) out.push(join(root, relative(dist, path)).replace(/\.js$/, '.ts'));
    else if (entry.name.endsWith('.json')) out.push(join(root, relative(dist, path)));
  }
  return out;
}

const config = readConfig(join(root, 'tsconfig.build.json'));
const inputs = [
  ...config.files,
  join(root, 'package-lock.json'),
  ...config.include.map(withoutGlob),
  ...(statSync(dist, { throwIfNoEntry: false }) ? builtSources(dist) : []),
];

const built = statSync(join(dist, 'stack', 'cli.js'), { throwIfNoEntry: false })?.mtimeMs ?? 0;
const [time, path] = inputs.map(newest).reduce((a, b) => (b[0] > a[0] ? b : a), [0, '']);
if (built >= time) process.exit(0);
if (process.argv.includes('--check')) {
  console.log(`stale: ${relative(root, path)} is newer than dist/`);
  process.exit(1);
}
const r = spawnSync(process.platform === 'win32' ? 'npm.cmd' : 'npm', ['run', 'build', '--silent'], {
  cwd: root,
  stdio: 'inherit',
});
process.exit(r.status ?? 1);
