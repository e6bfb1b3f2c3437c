/**
 * SLO classes through the real plugin server and a simulated vLLM replica: under overload the
 * sheddable class (named by llm-d's objective header, or by the Kong consumer's class) is delayed
 * in the gateway while the queues may still drain in time for its objective, and served once they
 * do; one that cannot meet its objective even so is refused first, 503 `shed_low_priority` with
 * Retry-After in OpenAI's format, while interactive requests are served.
 */
import type { KongDriver } from '../../harness/kong/driver';
import { waitFor } from '../../harness/wait';
import { LocalGateway } from '../../stack/gateway';
import { BASE, chatBody, onDemand, startWorld, usePluginServer, vllm } from './world';

let driver: KongDriver;
usePluginServer((_s, d) => {
  driver = d;
});

describe('slo_classes, through the plugin server', () => {
  let w: Awaited<ReturnType<typeof startWorld>> | undefined;
  let jamRoute: LocalGateway | undefined;
  afterEach(async () => {
    await jamRoute?.close();
    await w?.stop();
    jamRoute = w = undefined;
  });

  it('delays the batch class under overload and serves it once the queue drains; sheds one that cannot meet its objective, with Retry-After and an OpenAI error', async () => {
    // One sequence at a time, prefill at 1,000 tokens a modelled second (the router's prior
    // too), time 50x: an 80k-token prompt is predicted at 80 s and takes 1.6 s, long enough
    // that the jam still runs when the batch requests are decided on a loaded machine (with 40k
    // the first jam could end first: seen once with another suite beside it).
    const replica = vllm({
      timeScale: 50,
      maxModelLen: 200_000,
      engine: { maxNumSeqs: 1, kvCapacityTokens: 1_000_000, prefillMsPerToken: 1 },
    });
    const common = { prefill_tokens_per_second: 1000 };
    w = await startWorld(
      driver,
      [replica],
      (u) =>
        onDemand(u, {
          ...common,
          slo_classes: [
            { name: 'interactive', ttft_ms: 2000, priority: 0 },
            { name: 'batch', ttft_ms: 30000, priority: -1 },
          ],
          default_slo_class: 'interactive',
          consumer_slo_class: { nightly: 'batch' },
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
    // The overload comes through another route on the same node (it shares the replica's work
    // model, as two routes on one Kong node do), one that never holds.
    jamRoute = await LocalGateway.create({
      driver,
      plugins: [{ name: 'lora-router', config: onDemand(w.fleet.urls, { ...common, ttft_slo_ms: 0 }) }],
      serviceUrl: w.fleet.urls[0]!,
    });
    const send = (gw: LocalGateway, tokens: number, headers: Record<string, string> = {}) =>
      gw.handle({
        path: '/v1/chat/completions',
        headers: { 'content-type': 'application/json', ...headers },
        body: chatBody(BASE, tokens, 5),
      });
    // The router has seen the replica (one request each way, so nothing is held on a blind view).
    expect((await send(w.service, 10)).status).toBe(200);

    const jam = [send(jamRoute, 80_000), send(jamRoute, 80_000)];
    await waitFor(() => w!.fleet.replicas[0]!.engine.stats().waiting >= 1);

    // A batch request predicted past its 30 s objective if sent now (the jam is predicted at
    // 160 s): not refused but held in the gateway, since the queue may still drain in time.
    const delayed = send(w.service, 10, { 'x-gateway-inference-objective': 'batch' });
    // Batch by header, and batch by consumer (whose header cannot raise it), each with its own
    // 1.5 s objective: no drain of the queue leaves it in time, so refused at once.
    const shedAt = Date.now();
    const own = { 'x-slo-ttft-ms': '1500' };
    const byHeader = await send(w.service, 10, { 'x-gateway-inference-objective': 'batch', ...own });
    const byConsumer = await send(w.service, 10, {
      apikey: 'nightly',
      'x-gateway-inference-objective': 'interactive',
      ...own,
    });
    for (const r of [byHeader, byConsumer]) {
      expect(r.status).toBe(503);
      expect(Number(r.headers['Retry-After'])).toBeGreaterThanOrEqual(1);
      const err = JSON.parse(r.body.toString()).error;
      expect(err).toMatchObject({ type: 'server_error', code: 'shed_low_priority' });
      expect(err.message).toMatch(/'batch'/);
      expect(err.message).not.toMatch(/https?:\/\//);
    }
    // Refused in the gateway, not after a wait, while the jam still runs.
    expect(
      w.fleet.replicas[0]!.engine.stats().running + w.fleet.replicas[0]!.engine.stats().waiting,
    ).toBeGreaterThan(0);
    expect(Date.now() - shedAt).toBeLessThan(5000);

    // An interactive request under the same overload is served (held until the queue drains).
    const interactive = await send(w.service, 10);
    expect(interactive.status).toBe(200);
    for (const r of await Promise.all(jam)) expect(r.status).toBe(200);
    // The delayed batch request went once the queue drained: served, never refused.
    expect((await delayed).status).toBe(200);
    // Below capacity the batch class is served.
    expect((await send(w.service, 10, { 'x-gateway-inference-objective': 'batch' })).status).toBe(200);
    expect((await send(w.service, 10, { apikey: 'nightly' })).status).toBe(200);
    const metrics = (await w.status.handle({ method: 'GET', path: '/lora/metrics' })).body.toString();
    expect(metrics).toMatch(/code="shed_low_priority"\} 2$/m);
    expect((await w.statusJson()).inFlight).toBe(0);
  });
});

/** Two classes with objectives long enough that nothing is held or shed, on replicas told to run vLLM's priority policy. */
const PRIORITY_CLASSES = {
  slo_classes: [
    { name: 'interactive', ttft_ms: 600_000, priority: 0 },
    { name: 'batch', ttft_ms: 600_000, priority: -1 },
  ],
  default_slo_class: 'interactive',
  vllm_scheduling_policy: 'priority' as const,
};

/**
 * One replica running one sequence at a time (time 50x; `schedulingPolicy` as its flag), and the
 * two classes of PRIORITY_CLASSES: after a warm-up, a 40k-token prompt holds the slot (40 modelled
 * s, 0.8 s here), then a batch request and an interactive one wait behind it. Their answers (jam,
 * batch, interactive) and the order they were answered in. `onWorld` gets the world as soon as it
 * runs, for the test's cleanup.
 */
async function jamThenTwoClasses(
  onWorld: (w: Awaited<ReturnType<typeof startWorld>>) => void,
  schedulingPolicy?: 'priority',
): Promise<{ answers: Awaited<ReturnType<LocalGateway['handle']>>[]; order: string[] }> {
  const replica = vllm({
    timeScale: 50,
    maxModelLen: 200_000,
    engine: {
      maxNumSeqs: 1,
      kvCapacityTokens: 1_000_000,
      prefillMsPerToken: 1,
      ...(schedulingPolicy ? { schedulingPolicy } : {}),
    },
  });
  // Objectives long enough that nothing is held or shed: the order is the replica's alone.
  const w = await startWorld(driver, [replica], (u) =>
    onDemand(u, { prefill_tokens_per_second: 1000, ...PRIORITY_CLASSES }),
  );
  onWorld(w);
  const done: string[] = [];
  const send = (name: string, tokens: number, headers: Record<string, string> = {}) =>
    w.service
      .handle({
        path: '/v1/chat/completions',
        headers: { 'content-type': 'application/json', ...headers },
        body: chatBody(BASE, tokens, 5),
      })
      .then((r) => {
        done.push(name);
        return r;
      });
  expect((await send('warm', 10)).status).toBe(200);
  const engine = w.fleet.replicas[0]!.engine;
  const jam = send('jam', 40_000);
  await waitFor(() => engine.stats().running === 1);
  const batch = send('batch', 10, { 'x-gateway-inference-objective': 'batch' });
  await waitFor(() => engine.stats().waiting === 1);
  const interactive = send('interactive', 10);
  await waitFor(() => engine.stats().waiting === 2);
  const answers = await Promise.all([jam, batch, interactive]);
  return { answers, order: done.slice(1) };
}

describe('vllm_scheduling_policy: priority, through the plugin server', () => {
  let w: Awaited<ReturnType<typeof startWorld>> | undefined;
  afterEach(async () => {
    await w?.stop();
    w = undefined;
  });

  it("sets vLLM's priority field from the class: a waiting batch request goes after an interactive one sent later", async () => {
    // Run by priority as `--scheduling-policy priority` does.
    const { answers, order } = await jamThenTwoClasses((world) => (w = world), 'priority');
    for (const r of answers) expect(r.status).toBe(200);
    expect(order).toEqual(['jam', 'interactive', 'batch']);
  });
});

describe("vllm_scheduling_policy: priority, the client's body as it came", () => {
  let w: Awaited<ReturnType<typeof startWorld>> | undefined;
  afterEach(async () => {
    await w?.stop();
    w = undefined;
  });

  it("sends the client's bytes plus the priority field: numbers, key order, unicode and a client's own priority kept", async () => {
    w = await startWorld(driver, [vllm({ engine: { schedulingPolicy: 'priority' } })], (u) =>
      onDemand(u, {
        ...PRIORITY_CLASSES,
      }),
    );
    const send = (body: string, path = '/v1/chat/completions') =>
      w!.service.handle({
        path,
        headers: { 'content-type': 'application/json', 'x-gateway-inference-objective': 'batch' },
        body: Buffer.from(body),
      });
    // A seed past 2^53, a tool schema's 1.0 (a chat template renders it), integer-like keys out of
    // order, an escaped and a literal non-ASCII character: JSON.parse then stringify changes each.
    const sent =
      `{"model":"${BASE}","messages":[{"role":"user","content":"h\\u00e9 ü 😀"}],"max_tokens":3,` +
      '"seed":9007199254740993,"logit_bias":{"50256":-100,"123":1.0},' +
      '"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object",' +
      '"properties":{"t":{"type":"number","default":1.0,"maximum":1e2}}}}}]}\n';
    const r = await send(sent);
    expect(r.status).toBe(200);
    expect(r.kong.serviceBody).toBe(sent.trimEnd().slice(0, -1) + ',"priority":1}\n');
    // A client's own priority stays where it was; the router's comes last, and the last key is the
    // one vLLM (Python's json) and the simulated replica read.
    const pushy = `{"priority":-50,"model":"${BASE}","messages":[{"role":"user","content":"hi"}],"max_tokens":3}`;
    const p = await send(pushy);
    expect(p.status).toBe(200);
    expect(p.kong.serviceBody).toBe(pushy.slice(0, -1) + ',"priority":1}');
    expect(JSON.parse(p.kong.serviceBody!).priority).toBe(1);
    // The legacy completions route carries it as well (vLLM's CompletionRequest has the field too).
    const legacy = `{"model":"${BASE}","prompt":"hi","max_tokens":3}`;
    const c = await send(legacy, '/v1/completions');
    expect(c.status).toBe(200);
    expect(c.kong.serviceBody).toBe(legacy.slice(0, -1) + ',"priority":1}');
    expect((await w.statusJson()).inFlight).toBe(0);
  });
});

describe('vllm_scheduling_policy: priority against a replica without the flag', () => {
  let w: Awaited<ReturnType<typeof startWorld>> | undefined;
  afterEach(async () => {
    await w?.stop();
    w = undefined;
  });

  it('the replica accepts the priority field and serves first come first served; the lease comes back', async () => {
    // vLLM's V1 engine since PR #19057 passes `priority` on whatever the policy; without
    // `--scheduling-policy priority` the queue is FCFSRequestQueue, which never reads it
    // (vllm/v1/core/sched/request_queue.py `create_request_queue`, v0.11.0 and v0.11.2).
    const { answers, order } = await jamThenTwoClasses((world) => (w = world));
    for (const r of answers) expect(r.status).toBe(200);
    // The batch request carried priority 1 and was served anyway, in arrival order.
    expect(JSON.parse(answers[1]!.kong.serviceBody!).priority).toBe(1);
    expect(order).toEqual(['jam', 'batch', 'interactive']);
    const status = await w!.statusJson();
    expect(status.inFlight).toBe(0);
    // (The plugin server's runtime still lists earlier tests' replicas.)
    const here = status.replicas.find((r: { url: string }) => r.url === w!.fleet.urls[0]);
    expect(here.health).toBe('up');
  });
});
