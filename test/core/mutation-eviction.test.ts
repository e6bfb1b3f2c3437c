/**
 * Unit test of the eviction policies and filters (src/adapters/eviction.ts, one module), written
 * against the survivors of its mutation run (docs/reliability/mutation-testing.md): which
 * residents a replica may unload (loaded, idle, not configured static), which count against
 * `max_loaded_adapters`, and what each policy says losing a victim costs.
 */
import { EVICTION_POLICIES, evictable, lru, occupyingSlots, value } from '../../src/adapters/eviction';
import type { ResidentAdapter } from '../../src/fleet/types';

const r = (name: string, state: ResidentAdapter['state'], inFlight = 0, lastUsed = 0) =>
  ({ name, state, inFlight, lastUsed }) as ResidentAdapter;
const isStatic = (n: string) => n.startsWith('cfg-');

describe('eviction', () => {
  it('evicts only loaded, idle adapters not configured static', () => {
    const residents = [
      r('idle', 'loaded'),
      r('busy', 'loaded', 1),
      r('loading', 'loading'),
      r('unloading', 'unloading'),
      r('replica-static', 'static'),
      r('cfg-static', 'loaded'),
    ];
    expect(evictable(residents, isStatic).map((x) => x.name)).toEqual(['idle']);
  });

  it('counts against the slots everything but the replica’s and the configuration’s statics', () => {
    const residents = [r('a', 'loaded', 2), r('b', 'loading'), r('s', 'static'), r('cfg-x', 'loaded')];
    expect(occupyingSlots(residents, isStatic).map((x) => x.name)).toEqual(['a', 'b']);
  });

  it('lru costs the time of last use; value the frequency per copy, recency breaking ties', () => {
    expect(EVICTION_POLICIES).toEqual({ lru, value });
    expect(lru.name).toBe('lru');
    expect(value.name).toBe('value');
    expect(lru.cost(r('a', 'loaded', 0, 1234), { now: 0, frequency: () => 9, copies: () => 1 })).toBe(1234);
    const ctx = {
      now: 0,
      frequency: (n: string) => (n === 'a' ? 6 : 0),
      copies: (n: string) => (n === 'a' ? 3 : 0),
    };
    expect(value.cost(r('a', 'loaded', 0, 1e6), ctx)).toBeCloseTo(2 + 1e-6, 12);
    // No copy counted: divided by 1, never by 0.
    expect(value.cost(r('b', 'loaded', 0, 1e6), { ...ctx, frequency: () => 4 })).toBeCloseTo(4 + 1e-6, 12);
    // Never served: its recency alone, so the older goes first.
    const older = value.cost(r('b', 'loaded', 0, 1_000), ctx);
    const newer = value.cost(r('b', 'loaded', 0, 2_000), ctx);
    expect(older).toBeGreaterThan(0);
    expect(older).toBeLessThan(newer);
  });
});
