/**
 * Review of c64d634 (a poll's reading judged by `lastUsed > since` as well: src/adapters/unseen-busy.ts).
 * The excuse "a lease released since the poll began may be what the reading saw" read any move of
 * a resident's `lastUsed` at or past the poll's start as such a release. Three moves are not one:
 * a lease given back unused (a guessed lease whose decision went elsewhere: its request never ran
 * there), a hit's touch with no lease at all (a prefetch finding the adapter loaded:
 * AdapterManager.ensure), and another node's release stamped by its own clock, ahead of this
 * node's (a request that ended before this poll began). Each excused an adapter a router this node
 * cannot see was running from the unseen hold (docs/reliability.md, "An adapter someone unseen
 * routes is held"). The runtime's own wiring judges the reading (FleetRuntime, its poller's
 * `onReading`), over the in-process store and a real redis-server.
 */
import type { ReplicaWord } from '../../src/adapters/replica-word';
import { holdUnseenBusy } from '../../src/adapters/unseen-busy';
import { monotonic } from '../../src/clock';
import { LeaseHandle } from '../../src/lease';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import { busyReading, residentWatched } from '../helpers/unseen-hold';
import { giveBack } from '../../src/router/guessed-lease';
import { releaseLease } from '../../src/router/log-phase';
import type { FleetRuntime } from '../../src/runtime';
import { RedisServer } from '../../harness/redis/server';

const U = 'http://10.0.0.1:8000';

const reading = busyReading;

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('a poll’s reading, judged by the runtime (in-process store)', () => {
  let rt: FleetRuntime;
  afterEach(() => rt.stop());

  /** `c` loaded on U a while before the poll; the runtime's judge, and the holds it starts. */
  async function runtime(): Promise<{ held: string[]; judge: (startedMono: number) => Promise<void> }> {
    let held: string[];
    ({ rt, held } = await residentWatched(U, 'c'));
    return { held, judge: (startedMono) => rt.poller.onReading!(U, reading(['c']), startedMono) };
  }

  afterEach(() => jest.restoreAllMocks());

  it('holds what runs when a lease of it went back unused within the poll (a guessed lease)', async () => {
    const { held, judge } = await runtime();
    const started = monotonic(rt.clock);
    await pause(2);
    // The adapter's last replica was U: the request's lease is taken there before its decision,
    // which goes elsewhere; the lease goes back, no request of it ever reached U.
    const guess = { held: LeaseHandle.takeNow(rt, U, 'c')! };
    await giveBack(rt, guess);
    await judge(started);
    expect(held).toEqual(['c']);
  });

  it('holds what runs when a hit touched it within the poll with no lease (a prefetch finding it loaded)', async () => {
    const { held, judge } = await runtime();
    const started = monotonic(rt.clock);
    await pause(2);
    // AdapterManager.ensure's hit: a prefetch holds no lease of its own.
    await rt.store.touch(U, 'c', rt.clock.now());
    await judge(started);
    expect(held).toEqual(['c']);
  });

  it('holds nothing a request of this node under way when the poll began, ended within it, may explain', async () => {
    const { held, judge } = await runtime();
    const { lease } = LeaseHandle.takeNow(rt, U, 'c')!;
    await pause(2);
    const started = monotonic(rt.clock);
    await releaseLease(lease, 200);
    await judge(started);
    expect(held).toEqual([]);
  });
});

describe('a poll’s reading, over Redis, nodes’ clocks apart', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await RedisServer.start();
  });
  afterAll(async () => {
    await redis.close();
  });

  it('holds what runs when another node’s request ended before the poll began, its clock ahead', async () => {
    const a = new RedisFleetStore(redis.config('r64skew:'), 'A');
    const b = new RedisFleetStore(redis.config('r64skew:'), 'B');
    try {
      await a.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
      // `x` adopted by a poll of node A long before.
      const long = Date.now() - 10_000;
      await a.applySnapshot(U, {
        at: long + 5,
        startedAt: long,
        ok: true,
        registry: [{ name: 'x', path: '/adapters/x' }],
        managed: () => true,
      });
      // Node B's clock runs 200 ms ahead of A's (both valid: Kong nodes' clocks disagree). Its
      // request of `x` ends, and its release is stamped by its clock; then A's poll begins.
      const skew = 200;
      await b.acquire({ id: 'b1', url: U, adapter: 'x', at: Date.now() - 1000 + skew });
      await b.release('b1', Date.now() + skew, 200);
      await pause(20);
      const held: string[] = [];
      const word = { holdUnseen: (_url: string, name: string) => held.push(name) };
      // No request of node A ended since its poll began (its own word: `endedHere`, none).
      await holdUnseenBusy(a, word as unknown as ReplicaWord, null, U, reading(['x']));
      // B's request ended before A's poll began: what the reading saw ran with no lease anywhere.
      expect(held).toEqual(['x']);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
