/**
 * Review of 2003c38 (review 64: the unseen hold's excuse is "a request of this node routed to that
 * adapter on that replica ended since the poll began", ReplicaWord `servedEnded`). The log phase
 * told it for every lease it gave back, but a lease whose request never reached the replica says
 * nothing of what a poll read running there: a plugin after this one answered it (priority below
 * 900: proxy-cache's hit, request-termination; Kong's `get_source` 'exit'), Kong answered it
 * itself (the access phase failed after the decision was recorded, a refused connection: 'error'),
 * or the plugin gave the lease back when it could not record the decision. What the poll read
 * then ran for a router this node cannot see, and the excuse let this node unload it
 * (docs/reliability.md, "An adapter someone unseen routes is held"). Kong/kong 3.9.3
 * kong/pdk/response.lua `get_source`: 'service' only when the request was proxied and no error
 * or exit answered it.
 */
import { monotonic } from '../../src/clock';
import { silentLogger } from '../../src/log';
import { LeaseHandle } from '../../src/lease';
import { busyReading, residentWatched } from '../helpers/unseen-hold';
import type { MemoryFleetStore } from '../../src/fleet/memory-store';
import { SKEW_MARGIN_MS } from '../../src/fleet/redis/scripts/prelude';
import { SeenDown } from '../../src/fleet/redis/seen-down';
import type { SharedStore } from '../../src/fleet/redis/shared-store';
import type { ReplicaSnapshot } from '../../src/fleet/types';
import { logPhase, proxyFailed } from '../../src/router/log-phase';
import { FleetRuntime } from '../../src/runtime';

const U = 'http://10.0.0.1:8000';

const reading = busyReading;

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

let rt: FleetRuntime;
afterEach(() => {
  jest.restoreAllMocks();
  rt.stop();
});

/**
 * `c` loaded on U a while before; a request of this node routed to `c` on U is under way when a
 * poll begins (one opened after excuses nothing: unseen-order.test.ts), then gets its log phase
 * with `status` and `source`; the runtime's own judge reads `c` running.
 */
async function heldAfter(status: number | undefined, source: string): Promise<string[]> {
  let held: string[];
  ({ rt, held } = await residentWatched(U, 'c'));
  // A poll of U under way (its scrape answered, its reading about to be judged): the log phase
  // asks Kong's source only then (log-phase.ts `pollReading`).
  jest.spyOn(rt.poller, 'polling').mockImplementation((url) => url === U);
  const { lease } = LeaseHandle.takeNow(rt, U, 'c')!;
  await pause(2);
  const started = monotonic(rt.clock);
  const record = { lease: lease.id, replica: U, stage: 'holder' as const, adapter: 'c' };
  await logPhase(rt, record, status, () => Promise.resolve(source));
  await rt.poller.onReading!(U, reading(['c']), started);
  return held;
}

describe('the log phase tells "a request of this node ended there" only of one the replica answered', () => {
  it('holds what runs when a later plugin answered the request (a cache hit: source exit)', async () => {
    expect(await heldAfter(200, 'exit')).toEqual(['c']);
  });

  it('holds what runs when Kong answered it itself (the access phase failed after the decision)', async () => {
    expect(await heldAfter(500, 'error')).toEqual(['c']);
  });

  it("holds what runs after Kong's own 502 (a refused connection never reached the replica)", async () => {
    expect(await heldAfter(502, 'error')).toEqual(['c']);
  });

  it('holds nothing after a request the replica answered (source service), whatever its status', async () => {
    expect(await heldAfter(200, 'service')).toEqual([]);
    rt.stop();
    expect(await heldAfter(502, 'service')).toEqual([]);
  });
});

it('asks no source of a request ended while no poll of its replica is under way (nothing reads the tell)', async () => {
  rt = new FleetRuntime({ log: silentLogger });
  await rt.store.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
  const { lease } = LeaseHandle.takeNow(rt, U, 'c')!;
  const source = jest.fn(async () => 'service');
  const before = monotonic(rt.clock);
  await logPhase(rt, { lease: lease.id, replica: U, stage: 'holder', adapter: 'c' }, 200, source);
  expect(source).not.toHaveBeenCalled();
  // Not told: no poll begun before it was under way, and one begun after cannot have read it.
  expect(rt.manager.replicaWord.servedEndedSince(U, 'c', before)).toBe(false);
});

describe("Kong's own 502 marked while deciding alone, handed on when the shared store is back", () => {
  it('is dated by the time since the marking on the monotonic clock: a wall clock stepped since moves nothing', async () => {
    // The node's wall clock is stepped 5 s ahead (a skew correction) between the marking and the push.
    let wall = 1_000;
    let mono = 1_000;
    const clock = { now: () => wall, monotonic: () => mono, after: () => () => undefined };
    rt = new FleetRuntime({ log: silentLogger, clock });
    await rt.store.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
    await proxyFailed(rt, U, 502);
    mono += 500;
    wall += 500 + 5_000;
    const applied: ReplicaSnapshot[] = [];
    const shared = {
      sharedTime: async () => 100_000,
      applySnapshot: async (_url: string, s: ReplicaSnapshot) => void applied.push(s),
    } as unknown as SharedStore;
    await new SeenDown().push(rt.store as MemoryFleetStore, shared, clock, false);
    // Marked 500 ms ago: dated so on the shared clock (less the margin), not 5.5 s ago, when a poll
    // begun before the failure that read the replica up would be newer news and undo the marking.
    expect(applied.map((s) => s.sharedStartedAt)).toEqual([100_000 - 500 - SKEW_MARGIN_MS]);
  });
});
