/**
 * The request path's service (src/router/router.ts) on an in-process runtime with no network (a
 * virtual clock, snapshots applied by hand): what it answers itself, a refusal's response and
 * metrics, an internal failure's 500, and the lease handle's give-back through `finish`. Written
 * against the mutants the routing suites left alive (docs/reliability/mutation-testing.md).
 */
import type { ReplicaApi } from '../../src/backends/replica-api';
import { VirtualClock } from '../../src/clock';
import { ACCESS_WAIT_BUDGET_MS, parseRouterConfig } from '../../src/config/parse';
import { LeaseNotOpen } from '../../src/lease';
import type { Logger } from '../../src/log';
import { RouterService, type RouteOutcome } from '../../src/router/router';
import { FleetRuntime } from '../../src/runtime';
import { asRoundTrips } from '../helpers/round-trips';

const A = 'http://10.0.0.1:8000';
const body = (json: unknown) => Buffer.from(JSON.stringify(json));
const chat = (model: string) => body({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 });

async function service(over: Record<string, unknown> = {}, api?: ReplicaApi) {
  const lines: string[] = [];
  const log: Logger = {
    info: () => undefined,
    warn: (m) => lines.push(`warn ${m}`),
    error: (m) => lines.push(`error ${m}`),
  };
  const rt = new FleetRuntime({ clock: new VirtualClock(), log, seed: 1, ...(api ? { api } : {}) });
  const router = new RouterService(
    parseRouterConfig({
      base_model: 'base',
      replicas: [{ url: A }],
      adapters: [{ name: 'sql', path: '/a/sql' }],
      saturation_mode: 'count',
      ...over,
    }),
    rt,
  );
  rt.poller.stop();
  await rt.store.upsertReplica({ url: A, backend: 'vllm', priority: 0 });
  await rt.store.applySnapshot(A, {
    at: rt.clock.now(),
    ok: true,
    load: { running: 0, waiting: 0, kvUsage: 0.1, activeAdapters: [], malformedLines: 0 },
    registry: [],
    managed: () => true,
  });
  const counter = async (name: string) =>
    (await rt.metrics.registry.getSingleMetricAsString(name)).split('\n');
  return { rt, router, lines, counter };
}

/** A replica API that records the loads asked of it and is never scraped here. */
function recordingApi(): { loads: string[]; api: ReplicaApi } {
  const loads: string[] = [];
  const api: ReplicaApi = {
    scrape: async () => {
      throw new Error('no scrapes here');
    },
    loadAdapter: async (_url, name) => (loads.push(name), 'loaded'),
    unloadAdapter: async () => 'unloaded',
  };
  return { loads, api };
}

describe('RouterService', () => {
  let rt: FleetRuntime | undefined;
  afterEach(() => rt?.stop());

  it('answers the model list itself, offering an on-demand adapter only when it may load it', async () => {
    const s = await service({ max_loaded_adapters: 0 });
    rt = s.rt;
    const list = await s.router.route({ path: '/v1/models', body: undefined });
    expect(list).toMatchObject({ kind: 'respond', status: 200 });
    expect((list as { body: { data: { id: string }[] } }).body.data.map((m) => m.id)).toEqual(['base']);
    const card = await s.router.route({ path: '/v1/models/base', body: undefined });
    expect(card).toMatchObject({ kind: 'respond', status: 200, body: { id: 'base' } });
    const loads = await service({ max_loaded_adapters: 2 });
    try {
      const l = await loads.router.route({ path: '/v1/models', body: undefined });
      expect((l as { body: { data: { id: string }[] } }).body.data.map((m) => m.id)).toEqual(['base', 'sql']);
    } finally {
      loads.rt.stop();
    }
  });

  it('proxies a base-model request with a lease that `finish` gives back once', async () => {
    const s = await service();
    rt = s.rt;
    const out = await s.router.route({ path: '/v1/chat/completions', body: chat('base') });
    expect(out).toMatchObject({
      kind: 'proxy',
      url: A,
      host: '10.0.0.1',
      port: 8000,
      https: false,
      adapter: null,
    });
    if (out.kind !== 'proxy') throw new Error('not proxied');
    expect((await rt.store.views([A], undefined))[0]!.inFlight).toBe(1);
    await s.router.finish(out.leaseId, 200);
    expect((await rt.store.views([A], undefined))[0]!.inFlight).toBe(0);
    await expect(s.router.finish(out.leaseId, 200)).rejects.toThrow(LeaseNotOpen);
  });

  it('counts each decision by its stage once, whenever the metrics are read', async () => {
    const s = await service();
    rt = s.rt;
    const routed = async () => {
      const out = await s.router.route({ path: '/v1/chat/completions', body: chat('base') });
      if (out.kind !== 'proxy') throw new Error('not proxied');
      await s.router.finish(out.leaseId, 200);
    };
    await routed();
    await routed();
    expect(await s.counter('lora_router_decisions_total')).toContain(
      'lora_router_decisions_total{stage="base"} 2',
    );
    expect(await s.counter('lora_router_decisions_total')).toContain(
      'lora_router_decisions_total{stage="base"} 2',
    );
    await routed();
    expect(await s.counter('lora_router_decisions_total')).toContain(
      'lora_router_decisions_total{stage="base"} 3',
    );
  });

  it('a refusal: its status, OpenAI error body and headers, counted by code, no Retry-After for a 4xx', async () => {
    const s = await service({ max_loaded_adapters: 0 });
    rt = s.rt;
    const out = await s.router.route({ path: '/v1/chat/completions', body: chat('sql') });
    expect(out).toEqual({
      kind: 'respond',
      status: 404,
      body: { error: expect.objectContaining({ code: 'adapter_loading_disabled' }) },
      headers: { 'Content-Type': 'application/json' },
    });
    const bad = await s.router.route({ path: '/v1/chat/completions', body: Buffer.from('{') });
    expect(bad).toMatchObject({ status: 400, body: { error: { code: 'invalid_json' } } });
    expect(await s.counter('lora_router_errors_total')).toEqual(
      expect.arrayContaining([
        'lora_router_errors_total{code="adapter_loading_disabled"} 1',
        'lora_router_errors_total{code="invalid_json"} 1',
      ]),
    );
    expect(await s.counter('lora_router_refusals_total')).toContain('lora_router_refusals_total 0');
    expect(s.lines).toEqual([]);
  });

  it('a failure that is no RouterError: 500 router_error, logged with its stack', async () => {
    const s = await service();
    rt = s.rt;
    asRoundTrips(rt.store);
    rt.store.views = async () => {
      throw new Error('store broke');
    };
    const out = await s.router.route({ path: '/v1/chat/completions', body: chat('base') });
    expect(out).toMatchObject({ kind: 'respond', status: 500, body: { error: { code: 'router_error' } } });
    expect(s.lines).toHaveLength(1);
    expect(s.lines[0]).toMatch(/^error route failed: Error: store broke\n\s+at /);
    expect(await s.counter('lora_router_errors_total')).toContain(
      'lora_router_errors_total{code="router_error"} 1',
    );
  });

  it('a model no configuration lists, which no replica holds: 404 model_not_found', async () => {
    const s = await service({ max_loaded_adapters: 2 });
    rt = s.rt;
    const out = await s.router.route({ path: '/v1/chat/completions', body: chat('found') });
    expect(out).toMatchObject({ kind: 'respond', status: 404, body: { error: { code: 'model_not_found' } } });
  });

  it('a cold request spends the cold-load budget: the next cold load past it is refused', async () => {
    const { loads, api } = recordingApi();
    const s = await service(
      {
        max_loaded_adapters: 4,
        cold_loads_per_minute: 1,
        adapters: [
          { name: 'sql', path: '/a/sql' },
          { name: 'pg', path: '/a/pg' },
        ],
      },
      api,
    );
    rt = s.rt;
    const first = await s.router.route({ path: '/v1/chat/completions', body: chat('sql') });
    expect(first).toMatchObject({ kind: 'proxy', adapter: 'sql' });
    expect(loads).toEqual(['sql']);
    const second = await s.router.route({ path: '/v1/chat/completions', body: chat('pg') });
    expect(second).toMatchObject({ kind: 'respond', status: 429 });
    expect(loads).toEqual(['sql']);
  });

  it('with a shared store, the lease guessed on the last replica goes back when the decision refuses', async () => {
    const s = await service();
    rt = s.rt;
    // What the Redis store answers: the guess (a lease taken with the views) is made only there.
    rt.store.mode = () => 'redis';
    const inFlight = async () => (await rt!.store.views([A], undefined))[0]!.inFlight;
    const first = await s.router.route({ path: '/v1/chat/completions', body: chat('base') });
    if (first.kind !== 'proxy') throw new Error('not proxied');
    await s.router.finish(first.leaseId, 200);
    const viewsAndLease = rt.store.viewsAndLease!.bind(rt.store);
    let taken = 0;
    rt.store.viewsAndLease = (urls, ref, l) => (taken++, viewsAndLease(urls, ref, l));
    rt.poller.maxModelLen.set(A, 4); // the next request is longer than the replica's context
    const refused = await s.router.route({ path: '/v1/chat/completions', body: chat('base') });
    expect(refused).toMatchObject({
      kind: 'respond',
      status: 400,
      body: { error: { code: 'context_length_exceeded' } },
    });
    expect(taken).toBe(1); // the guessed lease, taken with the views
    expect(await inFlight()).toBe(0);
  });

  it('with slo_classes, a request that carries no class hints is routed (the hints are asked only if there)', async () => {
    const s = await service({
      slo_classes: [{ name: 'batch', ttft_ms: 30000, priority: -1 }],
      saturation_mode: 'predicted',
    });
    rt = s.rt;
    const out = await s.router.route({ path: '/v1/chat/completions', body: chat('base') });
    expect(out).toMatchObject({ kind: 'proxy', url: A });
    const asked: string[] = [];
    const hinted = await s.router.route({
      path: '/v1/chat/completions',
      body: chat('base'),
      slo: async () => (asked.push('slo'), { objective: 'batch' }),
    });
    expect(hinted).toMatchObject({ kind: 'proxy', url: A });
    expect(asked).toEqual(['slo']);
  });

  it('with slo_classes, a request that fails while held stops holding the classes below it', async () => {
    // 2,000 prompt tokens a second: a 20k-token prompt in flight is ~10 s of prefill ahead of the
    // next request, past the interactive class's 2 s objective.
    const s = await service({
      slo_classes: [
        { name: 'interactive', ttft_ms: 2000, priority: 0 },
        { name: 'batch', ttft_ms: 30000, priority: -1 },
      ],
      default_slo_class: 'interactive',
      saturation_mode: 'predicted',
      prefill_tokens_per_second: 2000,
    });
    rt = s.rt;
    const clock = rt.clock as VirtualClock;
    const completion = (chars: number) => body({ model: 'base', prompt: 'a'.repeat(chars), max_tokens: 10 });
    const holds = async () => (await rt!.metrics.ttftHolds.get()).values[0]?.value ?? 0;
    const long = await s.router.route({ path: '/v1/completions', body: completion(80_000) });
    if (long.kind !== 'proxy') throw new Error('not proxied');
    // Held behind it; the store fails while it waits: a 500.
    const views = rt.store.views.bind(rt.store);
    let failing = false;
    rt.store.views = (...a) => (failing ? Promise.reject(new Error('store broke')) : views(...a));
    let held: RouteOutcome | undefined;
    void s.router.route({ path: '/v1/completions', body: completion(400) }).then((o) => (held = o));
    await clock.run(clock.now() + 100);
    expect(await holds()).toBe(1);
    failing = true;
    await clock.run(clock.now() + 1000);
    expect(held).toMatchObject({ kind: 'respond', status: 500 });
    failing = false;
    await s.router.finish(long.leaseId, 200);
    // Nothing is held now: a batch request with nothing queued ahead goes at once.
    let batch: RouteOutcome | undefined;
    void s.router
      .route({ path: '/v1/completions', body: completion(400), slo: async () => ({ objective: 'batch' }) })
      .then((o) => (batch = o));
    await clock.run(clock.now() + 100);
    expect({ batch, holds: await holds() }).toMatchObject({ batch: { kind: 'proxy', url: A }, holds: 1 });
  });

  /** One slot, taken by `sql` with a request in flight that never ends here; then a cold `pg` request. */
  async function coldBehindBusy(over: Record<string, unknown>, beforeCold?: (rt: FleetRuntime) => void) {
    const { loads, api } = recordingApi();
    const s = await service(
      {
        max_loaded_adapters: 1,
        room_wait: 'replica',
        adapters: [
          { name: 'sql', path: '/a/sql' },
          { name: 'pg', path: '/a/pg' },
        ],
        ...over,
      },
      api,
    );
    rt = s.rt;
    const clock = rt.clock as VirtualClock;
    const busy = await s.router.route({ path: '/v1/chat/completions', body: chat('sql') });
    expect(busy).toMatchObject({ kind: 'proxy', adapter: 'sql' });
    beforeCold?.(rt);
    const started = clock.now();
    let ended: number | undefined;
    let cold: RouteOutcome | undefined;
    void s.router.route({ path: '/v1/chat/completions', body: chat('pg') }).then((o) => {
      cold = o;
      ended = clock.now();
    });
    // Past Kong's 60 s: a wait without its bounds would still be waiting.
    for (let i = 0; i < 70 && ended === undefined; i++) await clock.run(clock.now() + 1000);
    expect(loads).toEqual(['sql']);
    return { cold, waited: ended === undefined ? undefined : ended - started };
  }

  const slotsBusy = { kind: 'respond', status: 503, body: { error: { code: 'adapter_slots_busy' } } };

  it('a cold load that finds no idle adapter to unload waits queue_timeout_ms, not past it: 503', async () => {
    expect(await coldBehindBusy({ queue_timeout_ms: 2000 })).toMatchObject({ cold: slotsBusy, waited: 2000 });
  });

  it('a cold load whose wait for room would end past the access deadline ends at it: 503', async () => {
    // The request's first read of the store takes 30 s (a store that is slow to answer): the queue
    // timeout's 29 s after it would end past the 55 s the access phase has.
    const slowRead = (rt: FleetRuntime) => {
      asRoundTrips(rt.store);
      const views = rt.store.views.bind(rt.store);
      let slow = true;
      rt.store.views = async (...a) => {
        if (slow) {
          slow = false;
          await new Promise<void>((r) => rt.clock.after(30_000, r));
        }
        return views(...a);
      };
    };
    expect(await coldBehindBusy({ queue_timeout_ms: 29_000 }, slowRead)).toMatchObject({
      cold: slotsBusy,
      waited: ACCESS_WAIT_BUDGET_MS,
    });
  });
});
