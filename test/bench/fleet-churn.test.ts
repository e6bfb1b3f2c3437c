import { VirtualClock } from '../../src/clock';
import { DesFleet } from '../../bench/des/fleet';

/**
 * Churn counts each adapter copy's departure once (issue 34): released vLLM's unload takes the
 * name out of the registry and leaves the weights in the host LRU until a later load pushes them
 * out; that eviction completes the same unload, it is not a second one.
 */
describe('DesFleet churn: one unload per copy', () => {
  const fleet = (slots = 1) => {
    const clock = new VirtualClock();
    const f = new DesFleet(clock, { replicas: 1, slots, loadMs: 100, mode: 'managed' });
    return { clock, f, url: f.urls[0]! };
  };
  const settle = async (clock: VirtualClock, p: Promise<unknown>) => {
    await clock.run(clock.now() + 1000);
    return p;
  };

  it('an API unload whose weights the host cache pushes out later counts once', async () => {
    const { clock, f, url } = fleet(); // max_cpu_loras 2
    for (const name of ['a', 'b', 'c']) {
      await settle(clock, f.loadAdapter(url, name));
      if (name !== 'c') await f.unloadAdapter(url, name);
    }
    // Loading c pushed a's stale weights out of the host cache (2 entries: b's stale copy and c).
    expect(f.engines[0]!.stats().cachedAdapters.map((w) => w.split('#')[0])).toEqual(['b', 'c']);
    expect({ loads: f.totalLoads(), unloads: f.totalUnloads() }).toEqual({ loads: 3, unloads: 2 });
    expect(f.churnBreakdown()).toMatchObject({ apiUnloads: 2, evictions: 0, evictionsAfterUnload: 1 });
  });

  it('an API unload of a copy the host cache already pushed out counts once', async () => {
    const { clock, f, url } = fleet();
    for (const name of ['a', 'b', 'c']) await settle(clock, f.loadAdapter(url, name));
    // Three registered, two host entries: a's weights were evicted while registered.
    expect(f.engines[0]!.stats().cacheEvictions).toBe(1);
    await f.unloadAdapter(url, 'a');
    expect({ loads: f.totalLoads(), unloads: f.totalUnloads() }).toEqual({ loads: 3, unloads: 1 });
    expect(f.churnBreakdown()).toMatchObject({ apiUnloads: 1, apiUnloadsOfEvicted: 1, evictions: 1 });
  });

  it('never counts more unloads than loads', async () => {
    const { clock, f, url } = fleet(2);
    for (let i = 0; i < 20; i++) {
      await settle(clock, f.loadAdapter(url, `x${i}`));
      if (i % 3 !== 0) await f.unloadAdapter(url, `x${i - 1}`);
      expect(f.totalUnloads()).toBeLessThanOrEqual(f.totalLoads());
    }
  });
});
