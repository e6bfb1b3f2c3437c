/**
 * A request decided on a holder takes no placement claim: the adapter is there. Its lease may then
 * find it gone (another node unloaded it between the views and the lease) while another node placed
 * the adapter elsewhere. Loading it back on the holder, with no claim, makes two loads of one
 * adapter (the simulation's seed 1004317: `math` loading on replica-0 and replica-1 at once). Such a
 * request's load claims the shared placement first, as a cold one's does, and follows another's. Real parts: a FleetRuntime
 * and RouterService as in the plugin server, the HTTP replica simulator, whose own log says where
 * each adapter was loaded; the other node is its store calls.
 */
import { CoreHarness } from '../helpers/core-harness';
import { waitFor } from '../../harness/wait';

let h: CoreHarness | undefined;

afterEach(async () => {
  await h?.stop();
  h = undefined;
});

it('a request decided on a holder whose lease finds the adapter gone follows the placement another node made', async () => {
  h = await CoreHarness.start(
    [0, 1].map(() => ({ adapterDirs: ['/adapters'], timeScale: 1, engine: { loadBaseMs: 50 } })),
    (urls) => ({
      replicas: urls.map((url) => ({ url })),
      base_model: 'meta-llama/Llama-3.1-8B-Instruct',
      adapter_path_template: '/adapters/{name}',
      max_loaded_adapters: 1,
    }),
    100,
  );
  const { fleet, rt } = h;
  await waitFor(() => rt.poller.stats.polls > 1, 5000, 'first polls');
  const first = await h.chat('x', 1);
  expect(first.status).toBe(200);
  const holder = first.outcome.kind === 'proxy' ? first.outcome.url : '';
  const other = fleet.urls.find((u) => u !== holder)!;
  const store = rt.store;
  // Once the next request for `x` has read its views (`x` loaded on the holder): another node
  // unloads `x` there, idle, and places `x` on the other replica for a request of its own.
  let armed = true;
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
  const second = await h.chat('x', 1);
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
