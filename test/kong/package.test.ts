/**
 * The package an operator installs on a Kong node: `npm run package` here (scripts/pack.js: the
 * runtime build, kong-pdk bundled without TypeScript), `npm install -g` of the tarball into a temp
 * prefix that holds this Node as `bin/node`, as npm's default global prefix (Node's own) does,
 * then the installed `kong-lora-pluginserver` run as kong.conf's commands run it. The install
 * resolves the other dependencies from npm's cache first (warm after `npm ci`), the registry
 * otherwise.
 */
import { execFile, execFileSync } from 'node:child_process';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, sep } from 'node:path';
import { LocalGateway } from '../../stack/gateway';
import { KongDriver, PluginServerProcess, type PluginInfo } from '../../harness/kong/driver';
import { ROOT } from '../../harness/kong/process';
import { SimFleet } from '../../sim/fleet';
import { dumpPlugins } from './world';

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const tmp = mkdtempSync(join(tmpdir(), 'klr-package-'));
const prefix = join(tmp, 'prefix');
const installed = join(prefix, 'lib', 'node_modules', 'kong-lora-router');
const bin = join(prefix, 'bin', 'kong-lora-pluginserver');
/** Kong runs start_cmd and query_cmd through a shell whose PATH need not hold node: one without. */
const noNode = join(tmp, 'no-node');
mkdirSync(noNode);
const withoutNode = { ...process.env, PATH: noNode };
const prefixNode = join(prefix, 'bin', 'node');
let files: string[] = [];

beforeAll(() => {
  mkdirSync(join(prefix, 'bin'), { recursive: true });
  symlinkSync(process.execPath, prefixNode);
  execFileSync(npm, ['run', 'package', '--', tmp], { cwd: ROOT, stdio: 'pipe', timeout: 180_000 });
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

/** The installed command, as kong.conf runs it, with no node on its PATH. */
const dump = (dir: string, command = bin): PluginInfo[] =>
  JSON.parse(
    execFileSync(command, ['-d', dir, '--dump-all-plugins'], {
      timeout: 20_000,
      env: withoutNode,
    }).toString(),
  );

/** Bytes of every file under `dir` (symbolic links as links), as `du --apparent-size` counts them. */
function bytesUnder(dir: string): number {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    total += entry.isDirectory() ? bytesUnder(path) : lstatSync(path).size;
  }
  return total;
}

it('packs the two plugin entry files and their runtime, nothing of the simulator, stack, benchmark or tests', () => {
  expect(files.filter((f) => f.startsWith('lib/plugins/')).sort()).toEqual([
    'lib/plugins/lora-poller.js',
    'lib/plugins/lora-router.js',
  ]);
  expect(files).toEqual(
    expect.arrayContaining(['package.json', 'lib/pluginserver/main.js', 'lib/src/runtime.js']),
  );
  expect(files).toEqual(
    expect.arrayContaining(['bin/kong-lora-pluginserver', 'examples/kong.conf', 'examples/kong-3.9.conf']),
  );
  const runtime =
    /^(lib\/(plugins|pluginserver|src)\/.*\.js|bin\/kong-lora-pluginserver|examples\/.*\.conf)$/;
  const bundled = /^node_modules\/(kong-pdk|@msgpack\/msgpack)\//;
  expect(
    files.filter(
      (f) => !runtime.test(f) && !bundled.test(f) && !/^(package\.json|README\.md|LICENSE)$/.test(f),
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
    'prom-client',
    'undici',
    'yaml',
  ]);
  // The simulator's and the tests' modules stay out.
  const modules = readdirSync(join(installed, 'node_modules'));
  for (const dev of ['node-fetch', 'uuid', 'jest', 'openai', 'playwright-core', 'eslint']) {
    expect(modules).not.toContain(dev);
  }
  // kong-pdk as published, with what it runs beside it, each with its licence; for ts-node, which
  // it registers at load for .ts plugins, the stand-in (scripts/pack/ts-node).
  const pdk = join(installed, 'node_modules', 'kong-pdk');
  const version = (dir: string) => JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).version;
  expect(version(pdk)).toBe(pkg.dependencies['kong-pdk']);
  expect(readdirSync(join(pdk, 'node_modules')).sort()).toEqual(['commander', 'node-color-log', 'ts-node']);
  for (const dir of [
    pdk,
    join(pdk, 'node_modules', 'commander'),
    join(pdk, 'node_modules', 'node-color-log'),
  ])
    expect(existsSync(join(dir, 'LICENSE'))).toBe(true);
  expect(version(join(pdk, 'node_modules', 'ts-node'))).toMatch(/\+kong-lora-router\.stand-in$/);
  expect(version(join(installed, 'node_modules', '@msgpack', 'msgpack'))).toBe(
    pkg.dependencies['@msgpack/msgpack'],
  );
});

it('puts under 15 MB on the Kong node: the runtime, without the TypeScript kong-pdk was published with', () => {
  expect(bytesUnder(prefix) / 2 ** 20).toBeLessThan(15);
  const folders = (readdirSync(join(installed, 'node_modules'), { recursive: true }) as string[]).map((f) =>
    f.split(sep).join('/'),
  );
  expect(folders.filter((f) => /(^|\/)(typescript|@types)$/.test(f))).toEqual([]);
});

it('starts the installed plugin server as start_cmd does, with no node on its PATH, and it answers Kong', async () => {
  const server = await PluginServerProcess.start({
    command: bin,
    pluginsDir: join(installed, 'lib', 'plugins'),
    env: withoutNode,
  });
  const driver = new KongDriver(server.socketPath);
  try {
    const status = await LocalGateway.create({
      driver,
      plugins: [{ name: 'lora-poller', config: {} }],
      serviceUrl: 'http://127.0.0.1:9',
    });
    const page = await status.handle({ method: 'GET', path: '/lora/status' });
    await status.close();
    expect(page.status).toBe(200);
    expect(JSON.parse(page.body.toString())).toHaveProperty('replicas');
  } finally {
    driver.close();
    await server.stop();
  }
}, 60_000);

it('says where it looked when neither the install prefix nor the PATH has node', () => {
  renameSync(prefixNode, `${prefixNode}.away`);
  try {
    let message = '';
    try {
      execFileSync(bin, ['--dump-all-plugins', '-d', join(installed, 'lib', 'plugins')], {
        env: withoutNode,
        stdio: 'pipe',
      });
    } catch (err) {
      message = `${(err as { status: number }).status} ${(err as { stderr: Buffer }).stderr}`;
    }
    expect(message).toBe(
      `127 kong-lora-pluginserver: no node at ${join(realpathSync(prefix), 'bin', 'node')} nor on PATH (${noNode})\n`,
    );
  } finally {
    renameSync(`${prefixNode}.away`, prefixNode);
  }
});

describe.each([
  ['kong.conf', 1],
  ['kong-3.9.conf', 2],
])('the installed examples/%s', (file, entries) => {
  const conf = () => {
    const out: Record<string, string> = {};
    for (const line of readFileSync(join(installed, 'examples', file), 'utf8').split('\n')) {
      const m = line.match(/^\s*([a-z0-9_]+)\s*=\s*(.*?)\s*$/);
      if (m) out[m[1]!] = m[2]!;
    }
    return out;
  };

  it('names the command and plugin folders where `npm install -g` puts them (the prefix /usr/local)', () => {
    const c = conf();
    const names = c.pluginserver_names!.split(',');
    expect(names).toHaveLength(entries);
    const commands = names.flatMap((n) =>
      [c[`pluginserver_${n}_start_cmd`], c[`pluginserver_${n}_query_cmd`]].filter((x) => x !== undefined),
    );
    expect(commands.length).toBe(entries + 1);
    const dumped: string[] = [];
    for (const command of commands) {
      const [path, ...args] = command!.split(/\s+/);
      expect(path).toBe('/usr/local/bin/kong-lora-pluginserver');
      const dir = args[args.indexOf('-d') + 1]!;
      expect(dir.startsWith('/usr/local/lib/node_modules/kong-lora-router/lib/')).toBe(true);
      // The same paths under this test's prefix, run as Kong runs them.
      const here = (p: string) => join(prefix, p.slice('/usr/local/'.length));
      if (command!.endsWith('--dump-all-plugins'))
        dumped.push(...dump(here(dir), here(path!)).map((i) => i.Name));
      else expect(existsSync(join(here(dir), 'lora-router.js'))).toBe(true);
    }
    // Kong <= 3.8 registers every plugin a query_cmd prints, >= 3.9 the first of each.
    expect(dumped.sort()).toEqual(['lora-poller', 'lora-router']);
  });
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
