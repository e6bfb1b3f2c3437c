/**
 * A cold request's shared placement claim is checked again once it waited for room: meanwhile the
 * shared state may have lost the claim (Redis restarted empty, or the claim was taken while
 * the node decided alone) and another node placed the adapter elsewhere. Loading on the stale
 * claim makes two loads of one adapter (the simulation's seed 910: both nodes loaded `code` at
 * once on two replicas). Real parts: a FleetRuntime and RouterService as in the plugin server, the
 * HTTP replica simulator, whose own log says where each adapter was loaded; the other node is its
 * store calls.
 */
import { CoreHarness } from '../helpers/core-harness';
import { waitFor } from '../../harness/wait';
import { asRoundTrips } from '../helpers/round-trips';

let h: CoreHarness | undefined;

afterEach(async () => {
  await h?.stop();
  h = undefined;
});

/** Two simulated replicas of one slot each, loads of ~50 ms, polled every 100 ms (twice before it returns). */
async function twoReplicas(config: Record<string, unknown> = {}): Promise<CoreHarness> {
  h = await CoreHarness.start(
    [0, 1].map(() => ({ adapterDirs: ['/adapters'], timeScale: 1, engine: { loadBaseMs: 50 } })),
    (urls) => ({
      replicas: urls.map((url) => ({ url })),
      base_model: 'meta-llama/Llama-3.1-8B-Instruct',
      adapter_path_template: '/adapters/{name}',
      max_loaded_adapters: 1,
      ...config,
    }),
    100,
  );
  const rt = h.rt;
  await waitFor(() => rt.poller.stats.polls > 1, 5000, 'first polls');
  return h;
}

it('a cold request that waited for room follows the placement another node made meanwhile, not its stale claim', async () => {
  // Decode steps of 20 ms: `a` runs ~0.8 s, `b` ~1.6 s, once loaded.
  const { fleet, rt } = await twoReplicas({ queue_timeout_ms: 15_000, room_wait: 'replica' });
  const urls = fleet.urls;
  const chat = (model: string, maxTokens: number) => h!.chat(model, maxTokens);
  const store = rt.store;
  // Where this node claims `x`.
  const claims: string[] = [];
  const claimPlacement = store.claimPlacement.bind(store);
  store.claimPlacement = (adapter, url, seen, at, ttl) => {
    if (adapter === 'x') claims.push(url);
    return claimPlacement(adapter, url, seen, at, ttl);
  };
  // Each replica full (limit 1) with an adapter in use: `a` on one, `b` on the other.
  const a = chat('a', 40);
  await waitFor(
    () => fleet.replicas.some((r) => r.adapterLog().some((e) => e.name === 'a')),
    5000,
    'a loaded',
  );
  const b = chat('b', 80);
  await waitFor(
    () => fleet.replicas.some((r) => r.adapterLog().some((e) => e.name === 'b')),
    5000,
    'b loaded',
  );
  // `x` is decided, claimed, and waits for room on one of them.
  const x = chat('x', 1);
  await waitFor(() => claims.length > 0, 5000, 'x claimed');
  const waitsOn = claims[0]!;
  const other = urls.find((u) => u !== waitsOn)!;
  // The shared state loses the claim and another node places `x` on the other replica.
  await store.releasePlacement('x', waitsOn);
  expect(await store.claimPlacement('x', other, undefined, rt.clock.now(), 60_000)).toBe(other);
  const statuses = (await Promise.all([a, b, x])).map((r) => r.status);
  expect(statuses).toEqual([200, 200, 200]);
  // Loaded where the fleet placed it, and only there.
  const loadsOfX = fleet.replicas.flatMap((r) =>
    r
      .adapterLog()
      .filter((e) => e.op === 'load' && e.name === 'x')
      .map(() => r.url),
  );
  expect(loadsOfX).toEqual([other]);
}, 30_000);

/**
 * A request decided on a holder takes no placement claim: the adapter is there. Its lease may then
 * find it gone (another node unloaded it between the views and the lease) while another node placed
 * the adapter elsewhere. Loading it back on the holder, with no claim, makes two loads of one
 * adapter (the simulation's seed 1004317: `math` loading on replica-0 and replica-1 at once): its
 * load claims the shared placement first, as a cold one's does, and follows another's.
 */
it('a request decided on a holder whose lease finds the adapter gone follows the placement another node made', async () => {
  const { fleet, rt } = await twoReplicas();
  const first = await h!.chat('x', 1);
  expect(first.status).toBe(200);
  const holder = first.outcome.kind === 'proxy' ? first.outcome.url : '';
  const other = fleet.urls.find((u) => u !== holder)!;
  const store = rt.store;
  // Once the next request for `x` has read its views (`x` loaded on the holder): another node
  // unloads `x` there, idle, and places `x` on the other replica for a request of its own.
  let armed = true;
  asRoundTrips(store);
  const views = store.views.bind(store);
  store.views = async (urls, adapter, withResidents) => {
    const seen = await views(urls, adapter, withResidents);
    if (armed && adapter?.name === 'x' && urls.length > 1) {
      armed = false;
      const at = rt.clock.now();
      const fence = await store.beginUnload(holder, 'x', at, 60_000);
      expect(fence).not.toBeNull();
      await rt.api.unloadAdapter(holder, 'x', 5000);
      await store.finishUnload(holder, 'x', fence!, true, rt.clock.now());
      expect(await store.claimPlacement('x', other, undefined, rt.clock.now(), 60_000)).toBe(other);
    }
    return seen;
  };
  const second = await h!.chat('x', 1);
  expect(armed).toBe(false);
  expect(second.status).toBe(200);
  // Loaded where the fleet placed it, and only there.
  const loadsOfX = fleet.replicas.flatMap((r) =>
    r
      .adapterLog()
      .filter((e) => e.op === 'load' && e.name === 'x')
      .map(() => r.url),
  );
  expect(loadsOfX.sort()).toEqual([holder, other].sort());
  expect(second.outcome.kind === 'proxy' ? second.outcome.url : second.outcome.kind).toBe(other);
}, 30_000);
