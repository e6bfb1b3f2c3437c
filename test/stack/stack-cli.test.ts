/** `npm start`'s program as a user runs it: a child process, three curl-like calls, Ctrl-C. */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { call, chat, get, post } from '../helpers/http';

const CLI = join(__dirname, '..', '..', 'dist', 'stack', 'cli.js');
let child: ChildProcess;
let out = '';

function waitForOutput(re: RegExp, ms: number): Promise<RegExpMatchArray> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${re} in output within ${ms} ms:\n${out}`)), ms);
    const check = () => {
      const m = out.match(re);
      if (m) {
        clearTimeout(timer);
        resolve(m);
      }
    };
    child.stdout!.on('data', check);
    check();
  });
}

beforeAll(async () => {
  child = spawn(process.execPath, [CLI, '--port', '0', '--fleet-port', '0'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  await waitForOutput(/Ctrl-C stops everything/, 20000);
});

afterAll(() => {
  if (child.exitCode === null) child.kill('SIGKILL');
});

describe('npm start (the local stack as a child process)', () => {
  it('says it is a development harness and lists the Kong plugins it does not run', () => {
    expect(out).toMatch(/a development harness, not Kong/);
    expect(out).toMatch(/not run\s+key-auth, rate-limiting/);
  });

  it('serves the base model, an on-demand adapter (first call loads, second does not) and a llama.cpp adapter', async () => {
    const gw = out.match(/gateway\s+(http:\/\/\S+)/)![1]!;
    const llama = out.match(/llamacpp (http:\/\/\S+)/)![1]!;
    const loads = async (name: string) =>
      (await get(gw, '/lora/status'))
        .json()
        .events.filter(
          (e: { op: string; adapter: string; result: string }) =>
            e.op === 'load' && e.adapter === name && e.result === 'ok',
        ).length;

    const base = await call(gw, '/v1/chat/completions', { body: chat('meta-llama/Llama-3.1-8B-Instruct') });
    expect([base.status, base.json().model]).toEqual([200, 'meta-llama/Llama-3.1-8B-Instruct']);

    const first = await call(gw, '/v1/chat/completions', { body: chat('sql-lora') });
    expect([first.status, first.json().model]).toEqual([200, 'sql-lora']);
    expect(await loads('sql-lora')).toBe(1);
    const second = await call(gw, '/v1/chat/completions', { body: chat('sql-lora') });
    expect(second.status).toBe(200);
    expect(await loads('sql-lora')).toBe(1);

    const before = (await get(llama, '/_sim/state')).json().requests.length;
    const gguf = await call(gw, '/v1/chat/completions', { body: chat('support-gguf') });
    expect(gguf.status).toBe(200);
    const after = (await get(llama, '/_sim/state')).json().requests;
    expect(after.length).toBe(before + 1);
    expect(after.at(-1).adapter).toBe('/models/support.gguf');
  });

  it("says, without --verbose, that it keeps kong.yml's Redis state in process", () => {
    expect(out).toMatch(/lora-router: kong.yml shares fleet state in Redis \(redis\).*keeps it in process/);
  });

  it('prints a replica going down and coming back', async () => {
    const replica = out.match(/vllm (http:\/\/\S+)/)![1]!;
    expect(out).not.toMatch(/is down/);
    await post(replica, '/_sim/fault', { kind: 'error500', on: true });
    await waitForOutput(new RegExp(`replica ${replica} is down`), 15000);
    await post(replica, '/_sim/fault', { kind: 'clear' });
    await waitForOutput(new RegExp(`replica ${replica} is back up`), 15000);
  }, 40000);

  it('stops cleanly on Ctrl-C: exit 0 and the gateway port closed', async () => {
    const gw = out.match(/gateway\s+(http:\/\/\S+)/)![1]!;
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    child.kill('SIGINT');
    expect(await exited).toBe(0);
    await expect(get(gw, '/lora/status', 1000)).rejects.toThrow();
  });
});
