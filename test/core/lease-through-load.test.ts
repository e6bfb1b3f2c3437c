/**
 * A request's lease is open when it is proxied, however long its access phase waited for its
 * adapter. The lease is taken at admission, before the load; a load slower than
 * `lease_max_age_ms` let the expiry sweep reclaim it meanwhile, and the request went on with a
 * lease no store held, so its adapter could be unloaded under it (the simulation's seed 102923:
 * `chat unloaded with 0 running and 1 waiting`). The routing core over loopback HTTP to the
 * simulated vLLM, whose load takes longer than the lease's age.
 *
 * Nor does the lease age out while its request waits for room: nothing renews a lease on an
 * adapter the replica does not run yet, so a wait past `lease_max_age_ms` lost it and the load
 * made for the request landed with no lease on it, free for another waiter to unload (the
 * simulation's seed 1251595). A waiting request's lease is taken afresh every half max age
 * (src/router/waiting-lease.ts).
 */
import { adapterPolicy } from '../helpers/adapter-policy';
import { CoreHarness } from '../helpers/core-harness';

const LEASE_MAX_AGE_MS = 1000;

let h: CoreHarness | undefined;

/** Polls `cond` every 10 ms (real time: the replica runs on it). */
async function until(cond: () => Promise<boolean>): Promise<void> {
  while (!(await cond())) await new Promise((r) => setTimeout(r, 10));
}

/** One replica of one slot whose loads take 2.5 max ages, routed with the wait for room on it. */
function slowLoads(): Promise<CoreHarness> {
  return CoreHarness.start(
    [
      {
        adapterDirs: ['/adapters'],
        timeScale: 1,
        engine: { loadBaseMs: 2.5 * LEASE_MAX_AGE_MS, decodeMsPerStep: 20 },
      },
    ],
    (urls) => ({
      replicas: urls.map((url) => ({ url })),
      base_model: 'meta-llama/Llama-3.1-8B-Instruct',
      adapter_path_template: '/adapters/{name}',
      max_loaded_adapters: 1,
      lease_max_age_ms: LEASE_MAX_AGE_MS,
      room_wait: 'replica',
    }),
  );
}

/** The replica's own load and unload log, in order: what it was asked, not what the router counted. */
function calls(harness: CoreHarness): string[] {
  return harness.fleet.replicas[0]!.adapterLog().map((e) => `${e.op} ${e.name}`);
}

afterEach(async () => {
  await h?.stop();
  h = undefined;
});

describe('a lease outlives the wait for its adapter', () => {
  it('a load longer than lease_max_age_ms: the request is proxied on a lease the store holds', async () => {
    h = await CoreHarness.start(
      [{ adapterDirs: ['/adapters'], timeScale: 1, engine: { loadBaseMs: 2.5 * LEASE_MAX_AGE_MS } }],
      (urls) => ({
        replicas: urls.map((url) => ({ url })),
        base_model: 'meta-llama/Llama-3.1-8B-Instruct',
        adapter_path_template: '/adapters/{name}',
        max_loaded_adapters: 1,
        lease_max_age_ms: LEASE_MAX_AGE_MS,
      }),
    );
    const url = h.fleet.urls[0]!;
    const out = await h.router.route({
      path: '/v1/chat/completions',
      body: JSON.stringify({ model: 'x1', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
    });
    expect(out.kind).toBe('proxy');
    if (out.kind !== 'proxy') return;
    // The sweep ran meanwhile (each poll reclaims leases past their age), and once more now.
    await h.nextPoll();
    const store = h.rt.store;
    // The lease the request goes on with counts against its adapter: no unload may begin.
    expect((await store.views([url], { name: 'x1' }))[0]!.adapter?.inFlight ?? 0).toBe(1);
    expect(await store.beginUnload(url, 'x1', h.rt.clock.now(), 10_000)).toBeNull();
    await h.router.finish(out.leaseId, 200);
  }, 30_000);

  it('a wait for room longer than lease_max_age_ms: the load lands under a lease the store holds', async () => {
    h = await CoreHarness.start(
      [{ adapterDirs: ['/adapters'], timeScale: 1, engine: { loadBaseMs: 100, decodeMsPerStep: 20 } }],
      (urls) => ({
        replicas: urls.map((url) => ({ url })),
        base_model: 'meta-llama/Llama-3.1-8B-Instruct',
        adapter_path_template: '/adapters/{name}',
        max_loaded_adapters: 1,
        lease_max_age_ms: LEASE_MAX_AGE_MS,
        // The wait for room under the lease, on the replica chosen (escalate waits before the lease).
        room_wait: 'replica',
      }),
    );
    const url = h.fleet.urls[0]!;
    const store = h.rt.store;
    // x0 holds the one slot for 2.5 max ages, running on the replica (each poll renews its lease).
    await h.chat('x0', 2);
    const running = h.chat('x0', 125);
    while (((await store.views([url], { name: 'x0' }))[0]!.adapter?.inFlight ?? 0) === 0)
      await new Promise((r) => setTimeout(r, 10));
    // What the store counts on x1 as its load lands, before the request goes on.
    const atLanding: Promise<number>[] = [];
    h.rt.manager.addCallListener((r) => {
      if (r.op === 'load' && r.adapter === 'x1' && r.ok)
        atLanding.push(store.views([url], { name: 'x1' }).then((v) => v[0]!.adapter?.inFlight ?? 0));
    });
    const waiting = h.chat('x1', 2);
    expect((await running).status).toBe(200);
    expect((await waiting).status).toBe(200);
    expect(await Promise.all(atLanding)).toEqual([1]);
  }, 30_000);

  // The lease aged out under one load call, with no wake of a wait to renew it on: the load landed
  // with nothing counted on x1, and the request waiting for room unloaded it before x1's request
  // was sent; x1 was loaded again after x2.
  it('a load call longer than lease_max_age_ms: its adapter is not unloaded for a waiter before its request is sent', async () => {
    h = await slowLoads();
    const url = h.fleet.urls[0]!;
    const store = h.rt.store;
    const first = h.chat('x1', 2);
    await until(async () => (await store.views([url], { name: 'x1' }))[0]?.adapter?.state === 'loading');
    // x2 waits for the one slot, x1's, under way.
    const second = h.chat('x2', 2);
    expect((await first).status).toBe(200);
    expect((await second).status).toBe(200);
    expect(calls(h)).toEqual(['load x1', 'unload x1', 'load x2']);
  }, 30_000);

  // The same call seen from the store while it runs: the lease was taken at admission, and nothing
  // renewed it until the load landed, so the sweep reclaimed it mid-call and the store counted no
  // request on x1 (another node deciding on that count saw none) while its load was still called.
  it('a load call longer than lease_max_age_ms: the store counts its request while the replica is still loading', async () => {
    h = await CoreHarness.start(
      [{ adapterDirs: ['/adapters'], timeScale: 1, engine: { loadBaseMs: 4 * LEASE_MAX_AGE_MS } }],
      (urls) => ({
        replicas: urls.map((url) => ({ url })),
        base_model: 'meta-llama/Llama-3.1-8B-Instruct',
        adapter_path_template: '/adapters/{name}',
        max_loaded_adapters: 1,
        lease_max_age_ms: LEASE_MAX_AGE_MS,
      }),
    );
    const url = h.fleet.urls[0]!;
    const store = h.rt.store;
    const x1 = async () => (await store.views([url], { name: 'x1' }))[0]?.adapter;
    const first = h.chat('x1', 2);
    await until(async () => (await x1())?.state === 'loading');
    // Past the lease's max age on the router's clock, then a sweep (each poll reclaims leases past it).
    const pastAge = h.rt.clock.now() + 1.5 * LEASE_MAX_AGE_MS;
    await until(async () => h!.rt.clock.now() > pastAge);
    await h.nextPoll();
    const mid = await x1();
    // Still being loaded (the call takes 4 max ages), and the request it is for still counted.
    expect(mid?.state).toBe('loading');
    expect(mid?.inFlight ?? 0).toBeGreaterThan(0);
    expect((await first).status).toBe(200);
  }, 30_000);

  // A request that joins a load its process started without a lease (a prefetch: the manager's
  // ensure, as src/prefetch/prefetcher.ts calls it) awaited that load with no wake to renew on.
  it('a request joining a leaseless load longer than lease_max_age_ms: its adapter is not unloaded for a waiter before its request is sent', async () => {
    h = await slowLoads();
    const url = h.fleet.urls[0]!;
    const store = h.rt.store;
    const prefetch = h.rt.manager.ensure(
      url,
      { name: 'x1', path: '/adapters/x1' },
      adapterPolicy({ maxLoadedAdapters: 1, loadTimeoutMs: 10_000 }),
    );
    await until(async () => (await store.views([url], { name: 'x1' }))[0]?.adapter?.state === 'loading');
    const first = h.chat('x1', 2);
    // Its lease counted on x1 (it joined the load), then x2 waits for that slot.
    await until(async () => ((await store.views([url], { name: 'x1' }))[0]?.adapter?.inFlight ?? 0) === 1);
    const second = h.chat('x2', 2);
    expect(await prefetch).toBe('loaded');
    expect((await first).status).toBe(200);
    expect((await second).status).toBe(200);
    expect(calls(h)).toEqual(['load x1', 'unload x1', 'load x2']);
  }, 30_000);
});
