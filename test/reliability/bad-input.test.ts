/**
 * 10,000 generated bad requests through the real kong-js-pluginserver, as Kong drives it: the
 * server never crashes, every request is answered 4xx with an OpenAI-format JSON error, and no
 * request or load call reaches a replica.
 */
import { seededRandom } from '../../src/random';
import { KongDriver, PluginServerProcess } from '../../harness/kong/driver';
import { BASE, usePluginServer, startWorld, vllm } from '../kong/world';

let server: PluginServerProcess;
let driver: KongDriver;
usePluginServer((s, d) => {
  server = s;
  driver = d;
});

const N = 10_000;
const MAX_BODY = 64 * 1024;
const BUFFER = 128 * 1024;

interface Bad {
  kind: string;
  method: string;
  path: string;
  body: Buffer | null;
  headers: Record<string, string>;
}

function generator(seed: number): () => Bad {
  const r = seededRandom(seed);
  const pick = <T>(xs: T[]): T => xs[Math.floor(r() * xs.length)]!;
  const str = (n: number, alphabet = 'abc{}[]":,\\ \u0000\u001f\u00e9\u4e2d\ud83d\ude00/.') =>
    Array.from({ length: n }, () => pick([...alphabet])).join('');
  const chat = (model: unknown) => JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] });
  const kinds: [string, () => Pick<Bad, 'path' | 'body'>][] = [
    ['non-JSON', () => ({ path: '/v1/chat/completions', body: Buffer.from('not json ' + str(20)) })],
    [
      'truncated JSON',
      () => {
        const full = chat('sql-lora');
        return {
          path: '/v1/completions',
          body: Buffer.from(full.slice(0, 1 + Math.floor(r() * (full.length - 2)))),
        };
      },
    ],
    [
      'deeply nested',
      () => {
        const d = 1000 + Math.floor(r() * 50000);
        return {
          path: '/v1/chat/completions',
          body: Buffer.from(`{"model":${'['.repeat(d)}${']'.repeat(d)}}`),
        };
      },
    ],
    [
      'model of a wrong type',
      () => ({
        path: '/v1/chat/completions',
        body: Buffer.from(chat(pick<unknown>([1, -2.5, true, [], ['a'], { a: 1 }, null]))),
      }),
    ],
    [
      'huge model string',
      () => ({
        path: '/v1/chat/completions',
        body: Buffer.from(chat('x'.repeat(300 + Math.floor(r() * 40000)))),
      }),
    ],
    [
      'control and unicode characters',
      () => ({
        path: '/v1/chat/completions',
        body: Buffer.from(
          chat(
            pick(['a\u0000b', 'tab\there', '\u202eevil', 'é-lora', '中文', '😀', 'new\nline', ' lead']) +
              str(3, '\u0001\u0007\u001b'),
          ),
        ),
      }),
    ],
    [
      'traversal name',
      () => ({
        path: '/v1/chat/completions',
        body: Buffer.from(
          chat(pick(['../../etc/passwd', '..', 'a/../../b', '/abs/path', '..\\..\\win', 'x/y', '.'])),
        ),
      }),
    ],
    [
      'empty body',
      () => ({
        path: pick(['/v1/chat/completions', '/v1/completions']),
        body: pick([null, Buffer.alloc(0)]),
      }),
    ],
    [
      'JSON that is not an object',
      () => ({
        path: '/v1/chat/completions',
        body: Buffer.from(pick(['[]', '"str"', '42', 'null', 'true', '[{"model":"a"}]'])),
      }),
    ],
    [
      'no model',
      () => ({ path: '/v1/chat/completions', body: Buffer.from(JSON.stringify({ messages: [] })) }),
    ],
    [
      'over max_body_bytes',
      () => ({
        path: '/v1/chat/completions',
        body: Buffer.from(chat('sql-lora').replace('"hi"', `"${'y'.repeat(MAX_BODY)}"`)),
      }),
    ],
    [
      'past the body buffer',
      () => ({ path: '/v1/completions', body: Buffer.alloc(BUFFER + 1 + Math.floor(r() * 1000), 0x61) }),
    ],
    [
      'admin path',
      () => ({
        path: pick([
          '/v1/load_lora_adapter',
          '/v1/unload_lora_adapter',
          '/lora-adapters',
          '/_sim/fault',
          '/slots',
          '//v1//load_lora_adapter',
          '/x/v1/LOAD_LORA_ADAPTER',
          '/v1%2Fload_lora_adapter',
        ]),
        body: Buffer.from(
          pick(['{"lora_name":"x","lora_path":"/etc"}', '{"kind":"kill"}', '[{"id":0,"scale":1}]', '']),
        ),
      }),
    ],
  ];
  return () => {
    const [kind, make] = pick(kinds);
    const { path, body } = make();
    const headers: Record<string, string> =
      r() < 0.5
        ? {}
        : { 'content-type': pick(['application/json', 'text/plain', 'application/x-www-form-urlencoded']) };
    return { kind, method: pick(['POST', 'POST', 'PUT', 'PATCH', 'DELETE', 'GET']), path, body, headers };
  };
}

it(`answers ${N.toLocaleString('en-US')} generated bad requests with 4xx JSON errors, crash-free, contacting no replica`, async () => {
  const w = await startWorld(
    driver,
    [vllm({ staticAdapters: [{ name: 'boot', path: '/adapters/boot' }] })],
    (u) => ({
      replicas: u.map((url) => ({ url })),
      base_model: BASE,
      adapters: [{ name: 'sql-lora', path: '/adapters/sql-lora' }],
      adapter_path_template: '/adapters/{name}',
      max_loaded_adapters: 2,
      max_body_bytes: MAX_BODY,
    }),
    // nginx refuses what it would spool past max_body_bytes (client_max_body_size, docker/kong.conf):
    // Kong cannot hand such a body to the plugin (get_raw_body's nil is a Lua error, a 500).
    { bodyBufferBytes: BUFFER, maxBodyBytes: BUFFER },
  );
  try {
    const next = generator(7);
    const seen: Record<string, Record<number, number>> = {};
    const failures: string[] = [];
    const BATCH = 50;
    for (let i = 0; i < N; i += BATCH) {
      const batch = Array.from({ length: Math.min(BATCH, N - i) }, () => next());
      const replies = await Promise.all(
        batch.map((b) =>
          w.service.handle({
            method: b.method,
            path: b.path,
            body: b.body,
            headers: b.headers,
            bodyBufferBytes: BUFFER,
          }),
        ),
      );
      replies.forEach((rep, k) => {
        const b = batch[k]!;
        (seen[b.kind] ??= {})[rep.status] = (seen[b.kind]![rep.status] ?? 0) + 1;
        let body: { error?: { message?: unknown; type?: unknown; code?: unknown } } | undefined;
        try {
          body = JSON.parse(rep.body.toString('utf8'));
        } catch {
          body = undefined;
        }
        const nginx413 =
          b.kind === 'past the body buffer' &&
          rep.status === 413 &&
          (body as { message?: string } | undefined)?.message === 'Request size limit exceeded';
        const ok =
          nginx413 ||
          (rep.status >= 400 &&
            rep.status < 500 &&
            typeof body?.error?.message === 'string' &&
            typeof body.error.type === 'string' &&
            typeof body.error.code === 'string');
        if (!ok && failures.length < 10)
          failures.push(
            `${b.kind} ${b.method} ${b.path}: ${rep.status} ${rep.body.toString('utf8').slice(0, 120)}`,
          );
      });
    }
    expect(failures).toEqual([]);
    expect(server.exited).toBe(false);
    expect(w.fleet.replicas[0]!.requestRecords()).toEqual([]);
    expect(w.fleet.replicas[0]!.adapterLog()).toEqual([]);
    expect((await w.statusJson()).inFlight).toBe(0);
    // Every category was exercised, each with its own 4xx.
    expect(Object.keys(seen).length).toBe(13);
    expect(seen['admin path']).toEqual({ 403: expect.any(Number) });
    // A body Kong could not hand over: 413, or 405 when the method was wrong anyway (a GET).
    expect(Object.keys(seen['past the body buffer']!)).toEqual(expect.arrayContaining(['413']));
    expect(Object.keys(seen['past the body buffer']!).every((s) => s === '413' || s === '405')).toBe(true);
    expect(Object.keys(seen['over max_body_bytes']!)).toEqual(['413']);
  } finally {
    await w.stop();
  }
  // About 10 s quiet; a loaded machine takes several times that, and the count is the point.
}, 180_000);
