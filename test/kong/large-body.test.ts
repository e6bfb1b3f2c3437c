/**
 * A body past the size read from its bytes (src/router/body-json.ts), through the real plugin
 * server: msgpack hands it over as a view into its receive buffer, at any offset.
 */
import type { KongDriver } from '../../harness/kong/driver';
import { BASE, json, onDemand, startWorld, usePluginServer, vllm } from './world';

let driver: KongDriver;
usePluginServer((_, d) => (driver = d));

type World = Awaited<ReturnType<typeof startWorld>>;
let w: World | undefined;
afterEach(async () => {
  await w?.stop();
  w = undefined;
});

/** A chat body of about `bytes` bytes whose first `model` key is inside another object. */
const body = (bytes: number, content = 'x') => {
  const head = `{"extra":{"model":"no-such-model"},"model":"${BASE}","max_tokens":1,"messages":[{"role":"user","content":"`;
  const tail = '"}]}';
  const n = Math.ceil((bytes - head.length - tail.length) / content.length);
  return Buffer.from(head + content.repeat(n) + tail);
};

it('a 140 KB body is routed by its top-level model; an invalid one gets the same 400 as a small one', async () => {
  // 140 KB of prompt is about 35,000 tokens: within the simulated replica's context.
  w = await startWorld(driver, [vllm({ maxModelLen: 1 << 17 })], (u) =>
    onDemand(u, { max_body_bytes: 1 << 20 }),
  );
  for (const content of ['x', 'é😀 ', 'line\\n']) {
    const r = await w.service.handle({ path: '/v1/chat/completions', body: body(140_000, content) });
    expect([r.status, r.kong.luaErrors, r.status === 200 ? '' : r.body.toString()]).toEqual([200, [], '']);
  }
  expect(w.fleet.replicas[0]!.requestRecords()).toHaveLength(3);
  const invalid = body(140_000).toString().replace('xxxx', 'x\u0001x');
  for (const b of [invalid, invalid.slice(100_000)]) {
    const r = await w.service.handle({ path: '/v1/chat/completions', body: Buffer.from(b) });
    expect([r.status, json(r.body).error.code]).toEqual([400, 'invalid_json']);
  }
});
