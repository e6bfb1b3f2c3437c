/**
 * A request's lease is open when it is proxied, however long its access phase waited for its
 * adapter. The lease is taken at admission, before the load; a load slower than
 * `lease_max_age_ms` let the expiry sweep reclaim it meanwhile, and the request went on with a
 * lease no store held, so its adapter could be unloaded under it (the simulation's seed 102923:
 * `chat unloaded with 0 running and 1 waiting`). The routing core over loopback HTTP to the
 * simulated vLLM, whose load takes longer than the lease's age.
 */
import { CoreHarness } from '../helpers/core-harness';

const LEASE_MAX_AGE_MS = 1000;

let h: CoreHarness | undefined;
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
});
