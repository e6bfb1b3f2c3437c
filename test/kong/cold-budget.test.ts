/**
 * The cold-load budget (issue 16, item 10), through the real plugin server: beyond it a cold
 * request gets 429 with Retry-After in OpenAI's format, per consumer (when an authentication
 * plugin identified one) and fleet-wide; requests for resident adapters are never refused, and
 * their access phase still makes exactly 4 PDK calls (the consumer is read only when cold).
 */
import type { KongDriver } from './driver';
import { BASE, startWorld, usePluginServer, vllm } from './world';

let driver: KongDriver;
usePluginServer((_server, d) => {
  driver = d;
});

it('refuses cold loads past the per-consumer and fleet-wide budgets with 429, never a resident adapter', async () => {
  const w = await startWorld(
    driver,
    [vllm({ timeScale: 50 })],
    (urls) => ({
      replicas: urls.map((url) => ({ url })),
      base_model: BASE,
      adapter_path_template: '/adapters/{name}',
      max_loaded_adapters: 8,
      cold_loads_per_consumer_per_minute: 3,
      cold_loads_per_minute: 5,
    }),
    {
      // key-auth's part: the consumer Kong identified (ngx.ctx.authenticated_consumer).
      before: (req) => {
        const key = req.headers['apikey'];
        if (key) req.consumer = { id: `id-${key}`, username: key };
        return undefined;
      },
    },
  );
  const send = (model: string, apikey?: string) =>
    w.service.handle({
      path: '/v1/chat/completions',
      headers: { 'content-type': 'application/json', ...(apikey ? { apikey } : {}) },
      body: Buffer.from(
        JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
      ),
    });
  try {
    // alice: three cold loads, then the fourth is refused.
    for (const m of ['a1', 'a2', 'a3']) expect((await send(m, 'alice')).status).toBe(200);
    const refused = await send('a4', 'alice');
    expect(refused.status).toBe(429);
    expect(Number(refused.headers['Retry-After'] ?? refused.headers['retry-after'])).toBeGreaterThan(0);
    const err = JSON.parse(refused.body.toString()).error;
    expect(err).toMatchObject({ type: 'requests', code: 'rate_limit_exceeded' });
    expect(err.message).toMatch(/'a4'/);
    expect(err.message).not.toMatch(/https?:\/\//);
    // A resident adapter is never refused, and its access phase reads no consumer: 4 PDK calls.
    const hot = await send('a1', 'alice');
    expect(hot.status).toBe(200);
    expect(hot.kong.pdkCalls.access).toEqual([
      'kong.request.get_path',
      'kong.request.get_raw_body',
      'kong.ctx.shared.set',
      'kong.service.set_target',
    ]);
    // bob has his own budget, but the fleet's (5) is nearly spent: two more loads, then 429.
    expect((await send('b1', 'bob')).status).toBe(200);
    expect((await send('b2', 'bob')).status).toBe(200);
    const fleetWide = await send('b3', 'bob');
    expect(fleetWide.status).toBe(429);
    // Anonymous requests count against the fleet's budget only.
    expect((await send('anon')).status).toBe(429);
    for (const m of ['a1', 'a2', 'a3', 'b1', 'b2']) expect((await send(m)).status).toBe(200);
    expect(w.fleet.replicas[0]!.adapterLog().filter((e) => e.op === 'load')).toHaveLength(5);
    expect((await w.statusJson()).inFlight).toBe(0);
  } finally {
    await w.stop();
  }
});
