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

let h: CoreHarness | undefined;

afterEach(async () => {
  await h?.stop();
  h = undefined;
});

it('a cold request that waited for room follows the placement another node made meanwhile, not its stale claim', async () => {
  // Decode steps of 20 ms: `a` runs ~0.8 s, `b` ~1.6 s, once loaded.
  h = await CoreHarness.start(
    [0, 1].map(() => ({ adapterDirs: ['/adapters'], timeScale: 1, engine: { loadBaseMs: 50 } })),
    (urls) => ({
      replicas: urls.map((url) => ({ url })),
      base_model: 'meta-llama/Llama-3.1-8B-Instruct',
      adapter_path_template: '/adapters/{name}',
      max_loaded_adapters: 1,
      queue_timeout_ms: 15_000,
      room_wait: 'replica',
    }),
    100,
  );
  const { fleet, rt } = h;
  const urls = fleet.urls;
  const chat = (model: string, maxTokens: number) => h!.chat(model, maxTokens);
  await waitFor(() => rt.poller.stats.polls > 1, 5000, 'first polls');
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
