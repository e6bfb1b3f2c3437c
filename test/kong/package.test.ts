/**
 * The package an operator installs on a Kong node: `npm pack` here (its `prepack` builds the
 * runtime), `npm install -g` of the tarball into a temp prefix, then the installed
 * `kong-lora-pluginserver` run as kong.conf's query_cmd runs it. The install resolves the
 * dependencies from npm's cache first (warm after `npm ci`), the registry otherwise.
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PluginInfo } from './driver';
import { SimFleet } from '../../sim/fleet';
import { ROOT } from './process';
import { dumpPlugins } from './world';

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const tmp = mkdtempSync(join(tmpdir(), 'klr-package-'));
const prefix = join(tmp, 'prefix');
const installed = join(prefix, 'lib', 'node_modules', 'kong-lora-router');
const bin = join(prefix, 'bin', 'kong-lora-pluginserver');
let files: string[] = [];

beforeAll(() => {
  execFileSync(npm, ['pack', '--pack-destination', tmp], { cwd: ROOT, stdio: 'pipe', timeout: 180_000 });
  const [tarball] = readdirSync(tmp).filter((f) => f.endsWith('.tgz'));
  files = execFileSync('tar', ['-tzf', join(tmp, tarball!)])
    .toString()
    .trim()
    .split('\n')
    .map((f) => f.replace(/^package\//, ''));
  execFileSync(
    npm,
    ['install', '-g', '--prefix', prefix, join(tmp, tarball!), '--prefer-offline', '--no-audit', '--no-fund'],
    { cwd: tmp, stdio: 'pipe', timeout: 240_000 },
  );
}, 480_000);
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** The installed command, as kong.conf runs it (its `#!/usr/bin/env node` finds this Node). */
const dump = (dir: string): PluginInfo[] =>
  JSON.parse(
    execFileSync(bin, ['-d', dir, '--dump-all-plugins'], {
      timeout: 20_000,
      env: { ...process.env, PATH: `${join(process.execPath, '..')}:/usr/bin:/bin` },
    }).toString(),
  );

it('packs the two plugin entry files and their runtime, nothing of the simulator, stack, benchmark or tests', () => {
  expect(files.filter((f) => f.startsWith('lib/plugins/')).sort()).toEqual([
    'lib/plugins/lora-poller.js',
    'lib/plugins/lora-router.js',
  ]);
  expect(files).toEqual(
    expect.arrayContaining(['package.json', 'lib/pluginserver/main.js', 'lib/src/runtime.js']),
  );
  expect(
    files.filter(
      (f) => !/^(lib\/(plugins|pluginserver|src)\/.*\.js|package\.json|README\.md|LICENSE)$/.test(f),
    ),
  ).toEqual([]);
});

it('installs kong-lora-pluginserver, which dumps both plugins with their schemas from the installed plugins', () => {
  expect(existsSync(bin)).toBe(true);
  const infos = dump(join(installed, 'lib', 'plugins'));
  expect(infos.map((i) => i.Name).sort()).toEqual(['lora-poller', 'lora-router']);
  // Name, version, priority, phases and schema as the checkout's own build reports them.
  const byName = (l: PluginInfo[]) => Object.fromEntries(l.map((i) => [i.Name, i]));
  expect(byName(infos)).toEqual(byName(dumpPlugins()));
}, 60_000);

it('ships a directory per plugin for Kong >= 3.9 query commands, each dumping its plugin alone', () => {
  for (const name of ['lora-router', 'lora-poller']) {
    expect(dump(join(installed, 'lib', 'pluginserver', 'query', name)).map((i) => i.Name)).toEqual([name]);
  }
}, 60_000);

it('installs the runtime dependencies only', () => {
  const pkg = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8'));
  expect(Object.keys(pkg.dependencies).sort()).toEqual([
    '@msgpack/msgpack',
    'ioredis',
    'kong-pdk',
    'lru-cache',
    'prom-client',
    'undici',
    'yaml',
  ]);
  // The simulator's and the tests' modules stay out (kong-pdk brings its own ts-node, typescript).
  const modules = readdirSync(join(installed, 'node_modules'));
  for (const dev of ['node-fetch', 'uuid', 'jest', 'openai', 'playwright-core', 'eslint']) {
    expect(modules).not.toContain(dev);
  }
});

it("answers --version with the package's version, read from the installed package.json", () => {
  const { version } = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as {
    version: string;
  };
  const out = execFileSync(bin, ['--version'], {
    timeout: 20_000,
    env: { ...process.env, PATH: `${join(process.execPath, '..')}:/usr/bin:/bin` },
  });
  expect(out.toString().trim()).toBe(version);
});

it('installs kong-lora-router, whose doctor reads a Kong YAML configuration and checks its replicas', async () => {
  const fleet = await SimFleet.start([{}]);
  try {
    const config = join(tmp, 'kong.yml');
    writeFileSync(
      config,
      `_format_version: '3.0'\nplugins:\n  - name: lora-router\n    config:\n      max_loaded_adapters: 2\n      replicas:\n        - url: ${fleet.urls[0]}\n`,
    );
    const out = await new Promise<string>((resolve, reject) =>
      execFile(
        join(prefix, 'bin', 'kong-lora-router'),
        ['doctor', '--config', config],
        { timeout: 20_000, env: { ...process.env, PATH: `${join(process.execPath, '..')}:/usr/bin:/bin` } },
        (err, stdout) => (err ? reject(err) : resolve(stdout)),
      ),
    );
    expect(out).toContain(`${fleet.urls[0]}: fit (vllm`);
    expect(out).toContain('max_loaded_adapters: 2');
    expect(out).toContain('fleet: fit (1 replica)');
  } finally {
    await fleet.stop();
  }
}, 60_000);
