/**
 * `ttft_slo_ms` under overload, through RouterService against a simulated vLLM replica (real
 * HTTP on loopback, modelled time = wall time): a request no replica is predicted to start within
 * the objective waits in the router until one is (src/router/room-wait.ts `holds`); past the hold
 * it is routed, or, with a backlog of held requests and the queue still past the objective,
 * refused (503 `ttft_overload`).
 */
import { CoreHarness, sendVia } from '../helpers/core-harness';
import { templatedRouter } from '../helpers/replicas';
import type { RouteOutcome } from '../../src/router/router';

const BASE = 'meta-llama/Llama-3.1-8B-Instruct';

describe('the TTFT objective holds requests in overload, through RouterService', () => {
  let h: CoreHarness | undefined;
  afterEach(async () => {
    await h?.stop();
    h = undefined;
  });

  // The router assumes 2,000 prompt tokens a second until the replica's counters say otherwise:
  // a 20k-token prompt ahead is ~10 s of prefill, past a 1 s objective (the replica takes ~2 s).
  // The long request itself goes at once: its own prefill takes the objective, but nothing is
  // queued ahead of it.
  const start = (extra: Record<string, unknown>) =>
    CoreHarness.start([{ adapterDirs: ['/adapters'], timeScale: 1, maxModelLen: 32768 }], (urls) =>
      templatedRouter(urls, BASE, { prefill_tokens_per_second: 2000, ttft_slo_ms: 1000, ...extra }),
    );
  const body = (chars: number) => ({ model: BASE, prompt: 'a'.repeat(chars), max_tokens: 10 });
  /** The long request, routed, proxied and released as Kong would; `done` once answered. */
  const longRequest = () => {
    const s = { done: false, status: 0 };
    const p = sendVia(h!.router, '/v1/completions', body(80_000)).then((r) => {
      s.done = true;
      s.status = r.status;
    });
    return { s, p };
  };
  const route = (chars: number) =>
    h!.router.route({ path: '/v1/completions', body: Buffer.from(JSON.stringify(body(chars))) });
  const release = (o: RouteOutcome) => (o.kind === 'proxy' ? h!.router.finish(o.leaseId, 200) : undefined);
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  /** Requests held so far, as lora-poller's metrics route reports them. */
  const holds = async () => (await h!.rt.metrics.ttftHolds.get()).values[0]?.value ?? 0;

  /** A long request on the only replica, then a short one routed 200 ms after it. */
  const behindLong = async (config: Record<string, unknown>) => {
    h = await start(config);
    await h.nextPoll();
    const first = longRequest();
    await sleep(200);
    expect(first.s.done).toBe(false);
    const second = await route(400);
    expect(second.kind).toBe('proxy');
    return { first, second };
  };

  it('waits while the queue ahead is past the objective, and goes once it ends', async () => {
    // Predicted ~10 s behind the long prompt on the only replica, with 19 s of hold left: it
    // waits until the long request is answered and released.
    const { first, second } = await behindLong({ queue_timeout_ms: 20000 });
    expect(first.s.done).toBe(true);
    expect(await holds()).toBe(1);
    expect(first.s.status).toBe(200);
    await release(second);
    await first.p;
  });

  it('past the hold, with no backlog of held requests, routes the request to the fastest replica', async () => {
    // The hold ends ttft_slo_ms before queue_timeout_ms: 0.5 s after arrival. One request held
    // is no backlog (twice the replicas): it is sent, not refused (503 ttft_overload).
    const { first, second } = await behindLong({ queue_timeout_ms: 1500 });
    expect(first.s.done).toBe(false);
    await release(second);
    await first.p;
  });

  it('with the objective off (0), routes at once behind the queue', async () => {
    const { first, second } = await behindLong({ ttft_slo_ms: 0, queue_timeout_ms: 20000 });
    expect(first.s.done).toBe(false);
    expect(await holds()).toBe(0);
    await release(second);
    await first.p;
  });

  it('leaves no wake-up behind in the room signal once held requests end (base-model traffic never notifies)', async () => {
    // KV room for one long answer: while it runs (it reserves its prompt and max_tokens), the
    // others are predicted to wait for KV room well past the objective, and are held for the
    // 2 s window, woken only by the room signal's 250 ms fallback.
    h = await CoreHarness.start(
      [{ timeScale: 20, maxModelLen: 2048, engine: { kvCapacityTokens: 2048 } }],
      (urls) => templatedRouter(urls, BASE, { ttft_slo_ms: 1000, queue_timeout_ms: 3000 }),
    );
    await h.nextPoll(); // its KV capacity (vllm:cache_config_info)
    const long = sendVia(h.router, '/v1/completions', { model: BASE, prompt: 'hi', max_tokens: 2030 });
    const replica = h.fleet.replicas[0]!;
    const end = Date.now() + 5000;
    while (replica.engine.stats().running === 0 && Date.now() < end) await sleep(10);
    const held = await Promise.all(
      [1, 2, 3].map(() =>
        sendVia(h!.router, '/v1/completions', { model: BASE, prompt: 'hi', max_tokens: 100 }),
      ),
    );
    // Each goes once the long answer frees KV room, or, still held when its hold ends with the
    // long answer running, is refused (503 ttft_overload): either way it leaves the gateway.
    for (const r of held) {
      expect([200, 503]).toContain(r.status);
      if (r.outcome.kind === 'respond')
        expect(r.outcome.body).toMatchObject({ error: { code: 'ttft_overload' } });
    }
    expect(await holds()).toBe(3);
    expect((await long).status).toBe(200);
    expect(h.rt.manager.roomChanged.waiting).toBe(0);
  });
});
