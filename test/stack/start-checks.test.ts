/**
 * `npm start`'s program as a user meets it: a closed terminal (SIGHUP) stops it as Ctrl-C does,
 * its arguments are checked before anything starts, its errors name what is wrong and where,
 * and the "Try:" lines name only models the running fleet serves.
 */
import { join } from 'node:path';
import { call, chat } from '../helpers/http';
import { kongYamlCopy, ownTmp, startCli } from './cli-process';

const BASE = 'meta-llama/Llama-3.1-8B-Instruct';

it('SIGHUP (the terminal closed: its whole process group) stops it as Ctrl-C does, leaving nothing', async () => {
  const tmp = ownTmp();
  const cli = startCli(['--port', '0', '--fleet-port', '0'], { env: { TMPDIR: tmp.dir }, detached: true });
  try {
    await cli.until(/Ctrl-C stops everything/);
    expect(tmp.folders()).toHaveLength(1); // the plugin server's prefix folder
    process.kill(-cli.child.pid!, 'SIGHUP');
    expect(await cli.exited(20_000)).toBe(0);
    expect(cli.out()).toMatch(/stopping…/);
    expect(await tmp.leftBehind()).toEqual({ processes: [], folders: [] });
  } finally {
    await cli.stop();
    tmp.done();
  }
}, 60_000);

describe('arguments checked before anything starts: the error alone is printed, nothing is left', () => {
  const cases: [string, (dir: string) => string[], (dir: string) => string][] = [
    [
      'a --trace file that does not exist',
      (d) => ['--traffic', '--trace', join(d, 'missing.csv')],
      (d) => `npm start: --trace: no such file: ${join(d, 'missing.csv')}`,
    ],
    [
      'a --trace file that is no trace',
      () => ['--traffic', '--trace', join(__dirname, '..', '..', 'kong.yml')],
      () =>
        `npm start: --trace: ${join(__dirname, '..', '..', 'kong.yml')}: expected columns TIMESTAMP, ContextTokens, GeneratedTokens`,
    ],
    [
      '--trace without --traffic',
      () => ['--trace', 'x.csv'],
      () => 'npm start: --trace applies to the demo: add --traffic',
    ],
    [
      'a --config file that does not exist',
      (d) => ['--config', join(d, 'kong.yml')],
      (d) => `npm start: --config: no such file: ${join(d, 'kong.yml')}`,
    ],
    [
      'an unknown backend in --replicas',
      () => ['--replicas', 'foo=http://127.0.0.1:9'],
      () =>
        'npm start: --replicas: unknown backend "foo" in "foo=http://127.0.0.1:9" (backends: vllm, llamacpp)',
    ],
    [
      'a bad --requests',
      () => ['--traffic', '--requests', 'ten'],
      () => 'npm start: --requests must be a non-negative number, got "ten"',
    ],
  ];
  it.each(cases)('%s', async (_what, args, message) => {
    const tmp = ownTmp();
    const cli = startCli(['--port', '0', '--fleet-port', '0', ...args(tmp.dir)], {
      env: { TMPDIR: tmp.dir },
    });
    try {
      expect(await cli.exited(20_000)).toBe(1);
      expect({ out: cli.out().trim(), folders: tmp.folders() }).toEqual({
        out: message(tmp.dir),
        folders: [],
      });
    } finally {
      await cli.stop();
      tmp.done();
    }
  });
});

it("names the file, the service and the plugin of a configuration Kong's schema refuses, leaving nothing", async () => {
  const c = kongYamlCopy((deck) => {
    deck.services[0].plugins.find((p: { name: string }) => p.name === 'lora-router').config.kv_ceiling = 2;
  });
  // The plugin server validates the config: the fleet and it run by then, and must be stopped.
  const tmp = ownTmp();
  const cli = startCli(['--port', '0', '--fleet-port', '0', '--config', c.file], {
    env: { TMPDIR: tmp.dir },
  });
  try {
    expect(await cli.exited(30_000)).toBe(1);
    expect(cli.out()).toContain(
      `npm start: ${c.file}: service "llm-fleet": plugin lora-router: invalid configuration: config.kv_ceiling: value should be between 0.05 and 1`,
    );
    expect(await tmp.leftBehind()).toEqual({ processes: [], folders: [] });
  } finally {
    await cli.stop();
    tmp.done();
    c.done();
  }
});

describe('the "Try:" lines name only models the running fleet serves, and each answers 200', () => {
  const fleets: [string, (router: any) => void, string[]][] = [
    [
      'llama.cpp replicas only: no on-demand adapter (llama.cpp loads none at run time)',
      (router) =>
        (router.replicas = router.replicas.filter((r: { backend?: string }) => r.backend === 'llamacpp')),
      [BASE, 'support-gguf'],
    ],
    [
      'vLLM replicas, max_loaded_adapters unset (0: the router loads nothing), no start-up adapter held',
      (router) => {
        delete router.max_loaded_adapters;
        router.replicas = router.replicas.filter((r: { backend?: string }) => r.backend !== 'llamacpp');
      },
      [BASE],
    ],
    ['kong.yml as shipped', () => undefined, [BASE, 'sql-lora', 'support-gguf']],
  ];
  it.each(fleets)(
    '%s',
    async (_what, edit, models) => {
      const c = kongYamlCopy((deck) =>
        edit(deck.services[0].plugins.find((p: { name: string }) => p.name === 'lora-router').config),
      );
      const cli = startCli(['--port', '0', '--fleet-port', '0', '--time-scale', '4', '--config', c.file]);
      try {
        await cli.until(/Ctrl-C stops everything/);
        const gw = cli.out().match(/gateway\s+(http:\/\/\S+)/)![1]!;
        const named = [...cli.out().matchAll(/curl -s \S+ .*"model":"([^"]+)"/g)].map((m) => m[1]!);
        expect(named).toEqual(models);
        for (const model of named) {
          const r = await call(gw, '/v1/chat/completions', { body: chat(model), timeoutMs: 20_000 });
          expect([model, r.status]).toEqual([model, 200]);
        }
      } finally {
        await cli.stop();
        c.done();
      }
    },
    60_000,
  );
});
