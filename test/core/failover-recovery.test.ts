/**
 * Redis failover edge cases (issue 16, items 1-3), over a real redis-server: a lease must
 * never stay counted in Redis after its request ended, nor vanish from Redis while its request
 * is still running.
 */
import { randomBytes } from 'node:crypto';
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import { silentLogger } from '../../src/log';
import type { Lease } from '../../src/fleet/types';
import { RedisServer } from '../../harness/redis/server';
import { answered, waitFor } from '../../harness/wait';
import { snapshotWithA } from './helpers';

const U = 'http://10.0.0.1:8000';
const snapshot = snapshotWithA;

let redis: RedisServer;
beforeAll(async () => {
  redis = await RedisServer.start();
});
afterAll(async () => {
  await redis.close();
});

/**
 * Until the node decides on the shared store again: a call whose reply came late (a stalled
 * machine) left it deciding alone, and recovery replays what it did meanwhile (releases first).
 */
const sharedAgain = (s: FailoverFleetStore) =>
  waitFor(() => s.mode() === 'redis', 20_000, 'the node deciding on the shared store again');

const prefix = () => `fr${randomBytes(4).toString('hex')}:`;

async function node(p: string, id: string) {
  const shared = new RedisFleetStore(redis.config(p), id);
  const s = new FailoverFleetStore(shared, silentLogger, { probeMs: 50, logEveryMs: 60_000 });
  await s.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
  return { shared, s };
}

describe('FailoverFleetStore recovery (issue 16)', () => {
  it('item 1: a release that arrives while recover() hands 2,000 local leases back reaches Redis', async () => {
    const { shared, s } = await node(prefix(), 'n1');
    try {
      await s.applySnapshot(U, snapshot(1));
      // A lease taken in Redis before the outage: its request ends during the hand-over.
      expect(await s.acquire({ id: 'S1', url: U, adapter: 'a', at: 2 })).toBe('loaded');
      redis.pause(); // Redis hangs: it keeps S1 while this node decides alone
      const local: Lease[] = Array.from({ length: 2000 }, (_, i) => ({
        id: `L${i}`,
        url: U,
        adapter: 'a',
        at: 3,
      }));
      for (const l of local) await s.acquire(l);
      expect(s.mode()).toBe('local');
      // Release S1 as soon as the hand-over has begun (the store still says `local` then).
      let released: Promise<unknown> | null = null;
      const retake = shared.retake.bind(shared);
      shared.retake = (l) => {
        if (!released) released = s.release('S1', 4, 200);
        return retake(l);
      };
      redis.resume();
      await waitFor(() => s.mode() === 'redis', 20_000, 'recovery');
      await released;
      await sharedAgain(s);
      // Only the 2,000 open local leases count in Redis; S1 ended.
      expect(await answered(() => shared.inFlightTotal())).toBe(2000);
      for (const l of local) await s.release(l.id, 5, 200);
      // A release whose reply came late (a stalled machine: Stryker's first run, Received 1141)
      // left this node deciding alone, its release waiting here: recovery replays it.
      await sharedAgain(s);
      expect(await answered(() => shared.inFlightTotal())).toBe(0);
      expect((await answered(() => shared.views([U], { name: 'a' })))[0]!.adapter?.inFlight).toBe(0);
    } finally {
      redis.resume();
      await s.close();
    }
  }, 30_000);

  it('item 2: an acquire that timed out but ran in Redis later is released there too', async () => {
    const { shared, s } = await node(prefix(), 'n2');
    try {
      await s.applySnapshot(U, snapshot(1));
      redis.pause();
      try {
        // The reply times out: this node takes a local lease. The command still sits in Redis's socket.
        expect(await s.acquire({ id: 'T1', url: U, adapter: 'a', at: 2 })).toBe('loaded');
        expect(s.mode()).toBe('local');
        // The request ends before Redis is back.
        expect(await s.release('T1', 3, 200)).toMatchObject({ id: 'T1' });
      } finally {
        redis.resume();
      }
      await waitFor(() => s.mode() === 'redis', 10_000, 'recovery');
      // Redis ran the timed-out acquire when it resumed; the lease must not stay there.
      await waitFor(
        async () => (await answered(() => shared.inFlightTotal())) === 0,
        2000,
        'timed-out lease released in Redis',
      );
      const [v] = await answered(() => shared.views([U], { name: 'a' }));
      expect(v!.adapter?.inFlight ?? 0).toBe(0);
      expect(v!.inFlight).toBe(0);
    } finally {
      await s.close();
    }
  });

  it('item 3: after Redis restarts empty, leases opened in Redis before the crash count again', async () => {
    const p = prefix();
    const { shared, s } = await node(p, 'n3');
    let other: RedisFleetStore | undefined;
    try {
      await s.applySnapshot(U, snapshot(1));
      expect(await s.acquire({ id: 'R1', url: U, adapter: 'a', at: 2 })).toBe('loaded');
      await redis.stop();
      await s.views([U], { name: 'a' }); // notices the crash
      expect(s.mode()).toBe('local');
      await redis.start(); // empty
      await waitFor(() => s.mode() === 'redis', 10_000, 'recovery');
      // Another node, connecting to the restarted server: a bare store tells its caller once that
      // the server changed (only the failover layer acts on it), so it must not predate the restart.
      other = new RedisFleetStore(redis.config(p), 'n3-other');
      // The next poll adopts the adapter again; another node must see R1 in flight on it.
      await s.applySnapshot(U, snapshot(Date.now()));
      expect(await shared.inFlightTotal()).toBe(1);
      expect((await other.views([U], { name: 'a' }))[0]!.adapter).toMatchObject({
        state: 'loaded',
        inFlight: 1,
      });
      expect(await other.beginUnload(U, 'a', Date.now(), 60_000)).toBeNull();
      expect(await s.release('R1', 3, 200)).toMatchObject({ id: 'R1' });
      await sharedAgain(s);
      expect(await answered(() => shared.inFlightTotal())).toBe(0);
    } finally {
      await other?.close();
      await s.close();
    }
  });

  /**
   * A node on prefix `p` holds lease `id` on adapter 'a'; then another server (new run_id)
   * answers with the state as a replica had it (same epoch), `id` missing: the old primary
   * acknowledged it and failed before replicating it. `nodeTtlMs` sets the heartbeat (a quarter).
   */
  async function switchedLosing(p: string, node: string, id: string, nodeTtlMs: number) {
    const shared = new RedisFleetStore(redis.config(p, { node_ttl_ms: nodeTtlMs }), node);
    const s = new FailoverFleetStore(shared, silentLogger, { probeMs: 50, logEveryMs: 60_000 });
    await s.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
    await s.applySnapshot(U, snapshot(1));
    await redis.command(['SAVE']);
    expect(await s.acquire({ id, url: U, adapter: 'a', at: 2 })).toBe('loaded');
    await redis.stop();
    await redis.start();
    return { shared, s };
  }

  /** Waits until the node's lease `id` is counted on the new server, then gives it back there. */
  async function retakenThenReleased(p: string, s: FailoverFleetStore, id: string): Promise<void> {
    // Recovery re-takes the leases, then shares decisions again: on a loaded machine the first
    // can be seen a while before the second.
    await waitFor(
      async () => Number(await redis.command(['HLEN', `${p}lease`])) === 1 && s.mode() === 'redis',
      5000,
      `${id} counted on the new server, and the node back on it`,
    );
    expect(await s.release(id, 3, 200)).toMatchObject({ id });
  }

  it('after a failover to a server that missed its last writes, a heartbeat that sees the switch first still re-takes the leases', async () => {
    const p = prefix();
    // Heartbeats every 100 ms: with no decision to make, the heartbeat is the first call after the switch.
    const { shared, s } = await switchedLosing(p, 'n5', 'W1', 400);
    try {
      await retakenThenReleased(p, s, 'W1');
      await sharedAgain(s);
      expect(await answered(() => shared.inFlightTotal())).toBe(0);
    } finally {
      await s.close();
    }
  }, 15_000);

  it('after a failover to a server that missed a lease, calls that run beside the one told of the switch unload nothing under it', async () => {
    const p = prefix();
    // Heartbeats every 2.5 s: the calls below are the first after the switch.
    const { s } = await switchedLosing(p, 'n6', 'X1', 10_000);
    try {
      // Two decisions at once: one is told of the switch; the other must not unload 'a' under X1.
      const [, unload] = await Promise.all([
        s.views([U], { name: 'a' }),
        s.beginUnload(U, 'a', Date.now(), 60_000),
      ]);
      expect(unload).toBeNull();
      await retakenThenReleased(p, s, 'X1');
    } finally {
      await s.close();
    }
  }, 15_000);

  it('after a failover to a server that missed the end of a load, the load is ended there again (dst seed 1002201)', async () => {
    // The lost end left the adapter `loading` there until the lock's TTL: a request alone on
    // an idle fleet waited for it 7 s, then got a 503. The end sent again is old news: it ends the
    // lock and forgets the adapter there, marking nothing `loaded` (dst seed 1534246), so a request
    // may load it at once (answered "already loaded" if it is still there) or the next poll adopts it.
    const p = prefix();
    const shared = new RedisFleetStore(redis.config(p, { node_ttl_ms: 400 }), 'n7');
    const s = new FailoverFleetStore(shared, silentLogger, { probeMs: 50, logEveryMs: 60_000 });
    try {
      await s.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
      await s.applySnapshot(U, snapshot(1));
      const fence = await s.beginLoad(U, 'b', Date.now(), 4, 60_000);
      expect(fence).not.toBeNull();
      await redis.command(['SAVE']);
      expect(await s.finishLoad(U, 'b', fence!, true, Date.now())).toBe(true);
      await redis.stop();
      await redis.start();
      // The first decision is told of the switch; the probe's recovery shares decisions again.
      await s.views([U], { name: 'b' });
      await waitFor(async () => s.mode() === 'redis', 5000, 'the node back on the new server');
      // Read on the new server itself: through the node, a reply late on a stalled machine falls
      // back to the node's own state, which never saw 'b' (Stryker's first run: Received undefined).
      const [view] = await answered(() => shared.views([U], { name: 'b' }));
      expect(view!.adapter).toBeUndefined();
      // Its lock ended there: another load of it is granted (not while it read `loading`).
      expect(await answered(() => shared.beginLoad(U, 'b', Date.now(), 4, 60_000))).not.toBeNull();
    } finally {
      await s.close();
    }
  }, 15_000);

  it('item 3: when Redis loses everything without a disconnect (FLUSHALL), the next read takes the open leases again', async () => {
    const { shared, s } = await node(prefix(), 'n4');
    try {
      await s.applySnapshot(U, snapshot(1));
      expect(await s.acquire({ id: 'F1', url: U, adapter: 'a', at: 2 })).toBe('loaded');
      await shared.client.flushall();
      await s.views([U], { name: 'a' });
      expect(s.mode()).toBe('redis');
      expect(await shared.inFlightTotal()).toBe(1);
      expect((await shared.views([U]))[0]!.inFlight).toBe(1);
      expect(await s.release('F1', 3, 200)).toMatchObject({ id: 'F1' });
      await sharedAgain(s);
      expect(await answered(() => shared.inFlightTotal())).toBe(0);
    } finally {
      await s.close();
    }
  });

  it('a release and an admission while recovery drops released leases (its last step) reach Redis', async () => {
    // Seen in test/kong/sentinel.test.ts on a loaded machine: after a failover, two leases of
    // ended requests stayed in the new primary (both of its replica's slots pinned). Recovery
    // ended with an await (the prune) after its last check: a release in it was queued for a
    // replay that never came, an admission stayed local-only.
    const p = prefix();
    const { shared, s } = await node(p, 'n6');
    try {
      await s.applySnapshot(U, snapshot(1));
      expect(await s.acquire({ id: 'P1', url: U, adapter: 'a', at: 2 })).toBe('loaded');
      redis.pause();
      expect(await s.acquire({ id: 'P2', url: U, adapter: 'a', at: 3 })).toBe('loaded');
      expect(s.mode()).toBe('local');
      // While the prune runs: P1's request ends, P3's is admitted.
      let during: Promise<unknown> | null = null;
      const prune = shared.prune.bind(shared);
      shared.prune = (held) => {
        during ??= Promise.all([
          s.release('P1', 4, 200),
          s.acquire({ id: 'P3', url: U, adapter: 'a', at: 4 }),
        ]);
        return prune(held);
      };
      redis.resume();
      await waitFor(() => s.mode() === 'redis', 20_000, 'recovery');
      await during;
      expect(during).not.toBeNull();
      await sharedAgain(s);
      // P2 and P3 run: both counted in Redis; P1 ended: not.
      const open = async () => ((await redis.command(['HKEYS', `${p}lease`])) as string[]).sort();
      expect(await open()).toEqual(['P2', 'P3']);
      await s.release('P2', 5, 200);
      await s.release('P3', 5, 200);
      await sharedAgain(s);
      expect(await open()).toEqual([]);
      expect(await answered(() => shared.inFlightTotal())).toBe(0);
    } finally {
      redis.resume();
      await s.close();
    }
  }, 30_000);
  it('a node under steady traffic shares decisions again after Redis returns, each open lease counted there', async () => {
    // One request in flight at a time, each ended a tick after its admission: before, every
    // recovery pass found one admitted or ended alone meanwhile, each recovery gave up after its
    // passes, and the node decided alone for as long as the traffic lasted, Redis healthy.
    const p = prefix();
    const { s } = await node(p, 'n8');
    let stop = false;
    let open: string | null = null;
    let admitted = 0;
    const run = async () => {
      // Bounded: stopped below (the last request admitted stays open), or after this many.
      for (let i = 0; i < 10_000_000; i++) {
        const id = `Q${i}`;
        await s.acquire({ id, url: U, adapter: 'a', at: 3 });
        open = id;
        admitted++;
        await new Promise((r) => setImmediate(r));
        if (stop) return;
        await s.release(id, 4, 200);
        open = null;
      }
    };
    let traffic: Promise<void> = Promise.resolve();
    try {
      await s.applySnapshot(U, snapshot(1));
      // A lease taken in Redis before the outage, one taken alone during it: both run throughout.
      expect(await s.acquire({ id: 'S1', url: U, adapter: 'a', at: 2 })).toBe('loaded');
      redis.pause();
      expect(await s.acquire({ id: 'L1', url: U, adapter: 'a', at: 2 })).toBe('loaded');
      expect(s.mode()).toBe('local');
      traffic = run();
      const before = admitted;
      await waitFor(() => admitted > before + 100, 5000, 'requests admitted alone');
      redis.resume();
      await waitFor(() => s.mode() === 'redis', 5000, 'sharing decisions again');
      const since = admitted;
      await waitFor(() => admitted > since + 20, 5000, 'requests admitted on the shared store');
      stop = true;
      await traffic;
      await sharedAgain(s);
      const held = async () => ((await redis.command(['HKEYS', `${p}lease`])) as string[]).sort();
      expect(open).not.toBeNull();
      expect(await held()).toEqual([open!, 'L1', 'S1'].sort());
      for (const id of [open!, 'L1', 'S1']) await s.release(id, 5, 200);
      await sharedAgain(s);
      expect(await held()).toEqual([]);
    } finally {
      stop = true;
      redis.resume();
      await traffic;
      await s.close();
    }
  }, 30_000);
});
