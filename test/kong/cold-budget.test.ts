/**
 * The cold-load budget (issue 16, item 10), through the real plugin server: beyond it a cold
 * request gets 429 with Retry-After in OpenAI's format, per consumer (when an authentication
 * plugin identified one) and fleet-wide; requests for resident adapters are never refused, and
 * their access phase still makes exactly 4 PDK calls (the consumer is read only when cold).
 */
import type { KongDriver } from '../../harness/kong/driver';
import { waitFor } from '../../harness/wait';
import { BASE, startPluginServer, startWorld, usePluginServer, vllm } from './world';

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

it('charges a request once against the cold-load budget, however often escalation sends it to another replica', async () => {
  // Two replicas, one slot each, both held by a busy adapter: a cold request waits on its chosen
  // replica, escalates, and loads where a slot frees first. The fleet's budget is one load, in a
  // process of its own (the budget is process-wide without Redis: the test above spent it).
  const own = await startPluginServer();
  const w = await startWorld(own.driver, [vllm(), vllm()], (urls) => ({
    replicas: urls.map((url) => ({ url })),
    base_model: BASE,
    adapter_path_template: '/adapters/{name}',
    max_loaded_adapters: 1,
    room_wait: 'escalate',
    replica_wait_ms: 200,
    queue_timeout_ms: 20_000,
    cold_loads_per_minute: 1,
  }));
  const send = (model: string, maxTokens = 2) =>
    w.service.handle({
      path: '/v1/chat/completions',
      headers: { 'content-type': 'application/json' },
      body: Buffer.from(
        JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: maxTokens }),
      ),
    });
  try {
    // a and b were loaded before (another router, an operator): no budget spent on them.
    for (const [i, name] of [
      [0, 'a'],
      [1, 'b'],
    ] as const) {
      const r = await fetch(`${w.fleet.urls[i]}/v1/load_lora_adapter`, {
        method: 'POST',
        body: JSON.stringify({ lora_name: name, lora_path: `/adapters/${name}` }),
      });
      expect(r.status).toBe(200);
    }
    expect((await send('a')).status).toBe(200); // the router adopts both on its first poll
    await waitFor(async () => {
      const s = await w.statusJson();
      return s.replicas.filter((r: { adapters: unknown[] }) => r.adapters.length === 1).length === 2;
    });
    // Both slots busy through the router: about 1 s and 2 s of decoding.
    const busy = [send('a', 500), send('b', 1000)];
    await waitFor(() => w.fleet.replicas.every((r) => r.engine.stats().running > 0));
    const cold = await send('c');
    expect(cold.status).toBe(200);
    for (const r of await Promise.all(busy)) expect(r.status).toBe(200);
    const loads = w.fleet.replicas.flatMap((r) => r.adapterLog().filter((e) => e.op === 'load'));
    expect(loads.map((e) => [e.name, e.status]).sort()).toEqual([
      ['a', 200],
      ['b', 200],
      ['c', 200],
    ]);
    // It waited for room (past replica_wait_ms, so escalated): c loaded only after the busy
    // request on its replica ended.
    const on = w.fleet.replicas.find((r) => r.adapterLog().some((e) => e.name === 'c'))!;
    const loadC = on.adapterLog().find((e) => e.op === 'load' && e.name === 'c')!;
    const busyThere = on.requestRecords().find((r) => r.adapter !== 'c' && r.outputTokens >= 500)!;
    expect(loadC.at).toBeGreaterThanOrEqual(busyThere.end!);
    expect((await w.statusJson()).inFlight).toBe(0);
  } finally {
    await w.stop();
    own.driver.close();
    await own.server.stop();
  }
});
