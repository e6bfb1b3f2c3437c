// `npm start`, `npm run demo`, `npm run sim`: build only when a source is newer than dist/, so
// a second start (or `--help`) does not wait for tsc. `npm run build` always builds.
const { statSync, readdirSync } = require('node:fs');
const { join } = require('node:path');
const { spawnSync } = require('node:child_process');

const root = join(__dirname, '..');
// What tsconfig.build.json compiles, and what changes its output.
const inputs = [
  'src',
  'sim',
  'plugins',
  'bench',
  'stack',
  'test/kong/driver.ts',
  'tsconfig.json',
  'tsconfig.build.json',
  'package-lock.json',
];

function newest(path) {
  const st = statSync(path, { throwIfNoEntry: false });
  if (!st) return 0;
  if (!st.isDirectory()) return st.mtimeMs;
  return readdirSync(path).reduce((m, name) => Math.max(m, newest(join(path, name))), st.mtimeMs);
}

const built = statSync(join(root, 'dist', 'stack', 'cli.js'), { throwIfNoEntry: false })?.mtimeMs ?? 0;
const source = Math.max(...inputs.map((p) => newest(join(root, p))));
if (built < source) {
  const r = spawnSync(process.platform === 'win32' ? 'npm.cmd' : 'npm', ['run', 'build', '--silent'], {
    cwd: root,
    stdio: 'inherit',
  });
  process.exit(r.status ?? 1);
}
