/**
 * The plugin server's command line as an operator meets it (pluginserver/main.ts, cli.ts): its
 * output carries no terminal codes into Kong's error log, a socket it cannot create is named with
 * the reason, and `--version` is the project's.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KongDriver } from '../../harness/kong/driver';
import { PluginServerProcess, ROOT, TS_NODE_STAND_IN } from '../../harness/kong/process';
import { PLUGINS_DIR } from './world';

/** ESC: every colour and cursor code node-color-log writes starts with it. */
const ESC = '\u001b';

/** The command run to its end, with its output piped (not a terminal), as Kong runs it. */
function run(args: string[]) {
  const r = spawnSync(process.execPath, [PluginServerProcess.binary(), ...args], {
    timeout: 15_000,
    encoding: 'utf8',
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr, out: r.stdout + r.stderr };
}

let tmp: string;
beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'cli-'));
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

it("--version prints the project's version", () => {
  const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
  const r = run(['--version']);
  expect(r.status).toBe(0);
  expect(r.stdout.trim()).toBe(version);
});

it("the harness's servers load kong-pdk's ts-node as the package ships it: the stand-in", () => {
  // What kong-pdk's lib/mod.js gets from require('ts-node'), under the preload the harness starts
  // every server with, and without it (this checkout's real ts-node).
  const tsNode = (preload: string[]) =>
    spawnSync(
      process.execPath,
      [...preload, '-p', `require.resolve('ts-node', { paths: [require.resolve('kong-pdk/lib/mod.js')] })`],
      { cwd: ROOT, encoding: 'utf8', timeout: 15_000 },
    ).stdout.trim();
  expect(tsNode(['--require', TS_NODE_STAND_IN])).toBe(join(ROOT, 'scripts', 'pack', 'ts-node', 'index.js'));
  expect(tsNode([])).toBe(join(ROOT, 'node_modules', 'ts-node', 'dist', 'index.js'));
});

it('writes no colour or cursor codes when its output is not a terminal', async () => {
  const server = await PluginServerProcess.start({ pluginsDir: PLUGINS_DIR });
  try {
    // An error line too: an unknown instance, logged by the dispatch.
    const driver = new KongDriver(server.socketPath);
    await expect(driver.closeInstance(1)).rejects.toThrow('no plugin instance');
    driver.close();
    expect(server.log.some((l) => l.includes('server started at'))).toBe(true);
    expect(server.log.some((l) => l.includes('no plugin instance'))).toBe(true);
    expect(server.log.filter((l) => l.includes(ESC))).toEqual([]);
  } finally {
    await server.stop();
  }
  // Kong's query_cmd: clean JSON on stdout.
  const dump = run(['-d', PLUGINS_DIR, '--dump-all-plugins']);
  expect(dump.status).toBe(0);
  expect(dump.out).not.toContain(ESC);
  expect((JSON.parse(dump.stdout) as { Name: string }[]).map((p) => p.Name).sort()).toEqual([
    'lora-poller',
    'lora-router',
  ]);
});

describe('a socket it cannot create: where and why, and a non-zero exit', () => {
  const refused = (args: string[], where: string, why: string) => {
    const r = run(['-d', PLUGINS_DIR, ...args]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain(`cannot listen on ${where}: ${why}`);
    expect(r.out).not.toMatch(/^\s+at /m); // a sentence, not a stack trace
  };

  it('without -p: the default directory /usr/local/kong, missing here', () => {
    // The default prefix, as kong-pdk's cli.js sets it; a machine with Kong installed has it.
    expect(existsSync('/usr/local/kong')).toBe(false);
    refused([], '/usr/local/kong/js_pluginserver.sock', 'the directory /usr/local/kong does not exist');
  });

  it('a prefix that is a file, or a path too long for a unix socket', () => {
    const file = join(tmp, 'a-file');
    writeFileSync(file, '');
    refused(['-p', file], join(file, 'js_pluginserver.sock'), `${file} is not a directory`);
    const long = 'x'.repeat(120);
    const path = join(tmp, long);
    refused(
      ['-p', tmp, '--sock-name', long],
      path,
      `the path is ${Buffer.byteLength(path)} bytes, longer than a unix socket path may be (107)`,
    );
  });
});
