/**
 * `scripts/build-if-stale.js` (npm start, demo, sim) on a tree of its own: the project's
 * tsconfig files, a few sources, and a dist/ as the last build left it. `--check` reports
 * without building: exit 1 and the newer source when a rebuild is due.
 */
import { spawnSync } from 'node:child_process';
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

const ROOT = join(__dirname, '..', '..');
const BUILT = new Date('2026-01-02T00:00:00Z');
const BEFORE = new Date('2026-01-01T00:00:00Z');
const AFTER = new Date('2026-01-03T00:00:00Z');

let tree: string;

/** Dates `path` and its folders in the tree `when`. */
function date(path: string, when: Date): void {
  for (let p = join(tree, path); p !== tree; p = dirname(p)) utimesSync(p, when, when);
}

/** Writes `path` in the tree (a copy of the checkout's `from`, or empty), dated `when`. */
function put(path: string, when: Date, from?: string): void {
  const file = join(tree, path);
  mkdirSync(dirname(file), { recursive: true });
  if (from) copyFileSync(join(ROOT, from), file);
  else writeFileSync(file, '');
  date(path, when);
}

function check(): { stale: boolean; out: string } {
  const r = spawnSync(process.execPath, [join(tree, 'scripts', 'build-if-stale.js'), '--check'], {
    timeout: 10_000,
  });
  return { stale: r.status === 1, out: `${r.stdout}${r.stderr}` };
}

beforeEach(() => {
  tree = mkdtempSync(join(tmpdir(), 'klr-stale-'));
  put('scripts/build-if-stale.js', BEFORE, 'scripts/build-if-stale.js');
  for (const f of ['tsconfig.json', 'tsconfig.build.json', 'package-lock.json']) put(f, BEFORE, f);
  // Sources tsconfig.build.json includes, and files compiled only because driver.ts imports them.
  const sources = [
    'src/router/router.ts',
    'plugins/lora-router.ts',
    'pluginserver/main.ts',
    'stack/cli.ts',
    'test/kong/driver.ts',
    'test/kong/rpc.ts',
    'test/helpers/wait.ts',
  ];
  for (const s of sources) {
    put(s, BEFORE);
    put(`dist/${s.replace(/\.ts$/, '.js')}`, BUILT);
  }
  put('test/kong/plugins.test.ts', BEFORE); // a test jest runs from the source, never compiled
});
afterEach(() => rmSync(tree, { recursive: true, force: true }));

it('is fresh when every source is older than dist/', () => {
  expect(check()).toEqual({ stale: false, out: '' });
});

it('is stale when a file in pluginserver/ (which tsconfig.build.json includes) is newer', () => {
  put('pluginserver/main.ts', AFTER);
  const r = check();
  expect(r.stale).toBe(true);
  expect(r.out).toContain(join('pluginserver', 'main.ts'));
});

it('is stale when a file the last build compiled through an import (test/kong/rpc.ts) is newer', () => {
  put('test/kong/rpc.ts', AFTER);
  expect(check().stale).toBe(true);
});

it('is stale when a new file appears in an included folder, or a tsconfig changes', () => {
  put('src/fleet/new-module.ts', AFTER);
  expect(check().stale).toBe(true);
  rmSync(join(tree, 'src', 'fleet'), { recursive: true });
  date('src', BEFORE);
  expect(check().stale).toBe(false);
  put('tsconfig.json', AFTER, 'tsconfig.json');
  expect(check().stale).toBe(true);
});

it('follows the include list: a folder added there is watched, a test the build never compiles is not', () => {
  put('test/kong/plugins.test.ts', AFTER);
  expect(check().stale).toBe(false);
  const config = JSON.parse(readFileSync(join(tree, 'tsconfig.build.json'), 'utf8'));
  config.include.push('tools');
  writeFileSync(join(tree, 'tsconfig.build.json'), JSON.stringify(config));
  date('tsconfig.build.json', BEFORE);
  expect(check().stale).toBe(false);
  put('tools/new.ts', AFTER);
  expect(check().stale).toBe(true);
});
