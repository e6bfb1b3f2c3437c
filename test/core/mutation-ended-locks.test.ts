/**
 * Unit test of EndedLocks (src/fleet/redis/ended-locks.ts, one module), written against the
 * survivors of its mutation run (docs/reliability/mutation-testing.md): the ends of the locks this
 * node was granted in the shared store, sent again while each lock's TTL may still hold it there
 * (a server that missed the last writes), and only those: never a local lock's (negative fence),
 * never one not begun there, each once per replay, and none past its TTL.
 */
import type { Clock } from '../../src/clock';
import { EndedLocks } from '../../src/fleet/redis/ended-locks';
import type { SharedStore } from '../../src/fleet/redis/shared-store';

const U = 'http://a:8000';

function setup() {
  const t = { now: 1_000 };
  const clock: Clock = { now: () => t.now, after: () => () => undefined };
  const calls: string[] = [];
  const shared = {
    finishLoad: async (url: string, adapter: string, fence: number, ok: boolean, at: number) =>
      void calls.push(`load ${url} ${adapter} ${fence} ${ok} ${at}`),
    finishUnload: async (url: string, adapter: string, fence: number, ok: boolean, at: number) =>
      void calls.push(`unload ${url} ${adapter} ${fence} ${ok} ${at}`),
  } as unknown as SharedStore;
  return { t, calls, shared, locks: new EndedLocks(clock) };
}

describe('EndedLocks', () => {
  it('replays the ends of shared locks, load and unload, at the time of the replay, at every replay', async () => {
    const { t, calls, shared, locks } = setup();
    expect(locks.begin(7, 500)).toBe(7);
    expect(locks.begin(8, 500)).toBe(8);
    locks.end('load', U, 'a', 7, true);
    locks.end('unload', U, 'b', 8, false);
    t.now = 1_200;
    await locks.replay(shared);
    expect(calls).toEqual([`load ${U} a 7 true 1200`, `unload ${U} b 8 false 1200`]);
    calls.length = 0;
    t.now = 1_300;
    await locks.replay(shared);
    expect(calls).toEqual([`load ${U} a 7 true 1300`, `unload ${U} b 8 false 1300`]);
  });

  it('never replays a lock not begun in the shared store, a local one, or one ended twice twice', async () => {
    const { calls, shared, locks } = setup();
    expect(locks.begin(null, 500)).toBeNull();
    expect(locks.begin(-3, 500)).toBe(-3);
    expect(locks.begin(0, 500)).toBe(0);
    locks.end('load', U, 'x', -3, true);
    locks.end('load', U, 'y', 0, true);
    locks.end('load', U, 'z', 9, true); // never begun
    locks.begin(5, 500);
    locks.end('load', U, 'a', 5, true);
    locks.end('load', U, 'a', 5, true);
    await locks.replay(shared);
    expect(calls).toEqual([`load ${U} a 5 true 1000`]);
  });

  it('forgets an end once its lock’s TTL has passed, at the TTL exactly', async () => {
    const { t, calls, shared, locks } = setup();
    locks.begin(5, 500);
    locks.begin(6, 800);
    locks.end('load', U, 'a', 5, true);
    locks.end('load', U, 'b', 6, true);
    t.now = 1_499;
    await locks.replay(shared);
    expect(calls).toEqual([`load ${U} a 5 true 1499`, `load ${U} b 6 true 1499`]);
    calls.length = 0;
    t.now = 1_500;
    await locks.replay(shared);
    expect(calls).toEqual([`load ${U} b 6 true 1500`]);
    calls.length = 0;
    t.now = 1_800;
    await locks.replay(shared);
    expect(calls).toEqual([]);
  });

  it('an end recorded after others expired keeps only the live ones', async () => {
    const { t, calls, shared, locks } = setup();
    locks.begin(5, 100);
    locks.end('load', U, 'a', 5, true);
    t.now = 1_100;
    locks.begin(6, 100);
    locks.end('unload', U, 'b', 6, true);
    await locks.replay(shared);
    expect(calls).toEqual([`unload ${U} b 6 true 1100`]);
  });
});
