/**
 * `npm start -- --replicas URL,URL`: the real plugin server and the local gateway against the
 * user's own replicas. Here those are simulator replicas started separately, serving another
 * base model than kong.yml's, as a user's vLLM and llama.cpp servers would.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { SimFleet } from '../../sim/fleet';
import { call, chat } from '../helpers/http';
import { waitFor } from '../../harness/wait';

const CLI = join(__dirname, '..', '..', 'dist', 'stack', 'cli.js');
const BASE = 'acme/base-7b';
let fleet: SimFleet;
let child: ChildProcess;
let out = '';

beforeAll(async () => {
  fleet = await SimFleet.start([
    { backend: 'vllm', baseModel: BASE, runtimeLoading: true, adapterDirs: ['/adapters/'], timeScale: 4 },
    { backend: 'vllm', baseModel: BASE, runtimeLoading: true, adapterDirs: ['/adapters/'], timeScale: 4 },
    {
      backend: 'llamacpp',
      baseModel: BASE,
      staticAdapters: [{ path: '/models/support.gguf' }],
      startupMs: 0,
    },
  ]);
  const [a, b, llama] = fleet.urls;
  // One backend named, the others probed.
  child = spawn(process.execPath, [CLI, '--port', '0', '--replicas', `vllm=${a},${b},${llama}`], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  await waitFor(() => /Ctrl-C stops everything/.test(out) || child.exitCode !== null, 30_000, 'the stack');
});

afterAll(async () => {
  // SIGINT, so the stack stops what it started (its plugin server and prefix folder); SIGKILL
  // only if it does not end in time (that would leave them behind).
  if (child.exitCode === null && child.signalCode === null) {
    const ended = new Promise((r) => child.once('exit', r));
    child.kill('SIGINT');
    await Promise.race([ended, new Promise((r) => setTimeout(r, 10_000))]);
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
  await fleet?.stop();
});

describe("npm start -- --replicas (the user's own replicas)", () => {
  it('routes to them, with their base model and backends, loading adapters on them for real', async () => {
    const [a, b, llama] = fleet.urls;
    expect(out).toMatch(new RegExp(`vllm ${a}\\s+vllm ${b}\\s+llamacpp ${llama}`));
    expect(out).toMatch(/your replicas/);
    const gw = out.match(/gateway\s+(http:\/\/\S+)/)![1]!;
    expect(out).toContain(`"model":"${BASE}"`); // the "Try:" line names their base model

    const base = await call(gw, '/v1/chat/completions', { body: chat(BASE) });
    expect([base.status, base.json().model]).toEqual([200, BASE]);
    const adapter = await call(gw, '/v1/chat/completions', { body: chat('sql-lora') });
    expect([adapter.status, adapter.json().model]).toEqual([200, 'sql-lora']);
    const loads = fleet.replicas
      .slice(0, 2)
      .flatMap((r) => r.adapterLog())
      .filter((e) => e.op === 'load' && e.status === 200);
    expect(loads.map((e) => e.name)).toEqual(['sql-lora']);
    const gguf = await call(gw, '/v1/chat/completions', { body: chat('support-gguf') });
    expect(gguf.status).toBe(200);
    expect(fleet.replicas[2]!.requestRecords().at(-1)!.adapter).toBe('/models/support.gguf');
  });

  it("stops without stopping the user's replicas", async () => {
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    child.kill('SIGINT');
    expect(await exited).toBe(0);
    for (const u of fleet.urls) expect((await call(u, '/v1/models')).status).toBe(200);
  });

  it("runs the user's own kong.yml against the replicas it names (--replicas config)", async () => {
    const [a, b, llama] = fleet.urls;
    const deck = parse(readFileSync(join(__dirname, '..', '..', 'kong.yml'), 'utf8'));
    const router = deck.services[0].plugins.find((p: { name: string }) => p.name === 'lora-router').config;
    router.replicas = [{ url: a }, { url: b }, { url: llama, backend: 'llamacpp' }];
    router.base_model = BASE;
    const dir = mkdtempSync(join(tmpdir(), 'real-replicas-'));
    const file = join(dir, 'my-kong.yml');
    writeFileSync(file, stringify(deck));
    let text = '';
    const own = spawn(process.execPath, [CLI, '--port', '0', '--config', file, '--replicas', 'config'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    own.stdout!.on('data', (c: Buffer) => (text += c.toString()));
    own.stderr!.on('data', (c: Buffer) => (text += c.toString()));
    try {
      await waitFor(() => /Ctrl-C stops everything/.test(text) || own.exitCode !== null, 30_000, 'the stack');
      expect(text).toMatch(new RegExp(`vllm ${a}\\s+vllm ${b}\\s+llamacpp ${llama}`));
      const gw = text.match(/gateway\s+(http:\/\/\S+)/)![1]!;
      const r = await call(gw, '/v1/chat/completions', { body: chat('chat-lora') });
      expect([r.status, r.json().model]).toEqual([200, 'chat-lora']);
      const base = await call(gw, '/v1/chat/completions', { body: chat(BASE) });
      expect([base.status, base.json().model]).toEqual([200, BASE]);
    } finally {
      own.kill('SIGINT');
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
