/**
 * Review 58 of the failover changes, over a real redis-server. Each case says how it failed on
 * the code before its fix.
 */
import type { ReplicaApi, Scrape } from '../../src/backends/replica-api';
import type { Clock } from '../../src/clock';
import { parseRouterConfig } from '../../src/config/parse';
import { EndedLocks } from '../../src/fleet/redis/ended-locks';
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import type { SharedStore } from '../../src/fleet/redis/shared-store';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import { silentLogger } from '../../src/log';
import { RouterService } from '../../src/router/router';
import { FleetRuntime } from '../../src/runtime';
import { RedisServer } from '../../harness/redis/server';
import { stateInRedis } from '../helpers/redis-stores';
import { waitFor } from '../../harness/wait';
import { snapshotWithA, vllmSpec } from './helpers';

const U1 = 'http://10.0.0.1:8000';

let redis: RedisServer;
beforeAll(async () => {
  redis = await RedisServer.start();
});
afterAll(async () => {
  await redis.close();
});

/** Heartbeats every 15 s: no heartbeat takes part in these cases (each is called as a heartbeat would). */
function node(prefix: string, id: string) {
  const shared = new RedisFleetStore(redis.config(prefix, { node_ttl_ms: 60_000, timeout: 2000 }), id);
  return { shared, s: new FailoverFleetStore(shared, silentLogger, { probeMs: 50, logEveryMs: 60_000 }) };
}

/** What a peer still on that state reads of `adapter` on U1 (undefined: not resident). */
const stateIn = (prefix: string, adapter: string) => stateInRedis(redis, prefix, U1, adapter);

/** What a heartbeat does once it finds the server switched or emptied (`onStateLost`), awaited. */
const heartbeatFoundStateLost = (s: FailoverFleetStore) =>
  (s as unknown as { reclaimShared(): Promise<void> }).reclaimShared();

/**
 * A server that lost writes (a restart from a snapshot, a Sentinel switch) with its fence counter
 * ahead of its clock hands a fence out again (prelude.ts `newfence`). Two stores of one node on one
 * state (a runtime replaced for a changed timeout, its predecessor still draining) both replay
 * the lock ends they owe when their heartbeat finds the state lost (`reclaim`). Review 57 kept an
 * end owed under a fence the other holds a lock under from `adopt`; the reclaim of a store not
 * yet adopted sent it still: the script took the other store's lock for its own (one node id) and
 * ended it, and the adapter read `loaded` (or gone) while the load (or unload) ran: a request sent
 * on it gets the replica's 404 until the load lands.
 */
describe('a lock end owed by one store of a node, the fence handed out again to another of its stores', () => {
  /** `owes` loads and ends `b` under a fence; a peer unloads it; the counter goes back; `holds` loads `b` under that fence. */
  async function handedOutAgain(P: string, owes: FailoverFleetStore, holds: FailoverFleetStore) {
    // Another node, its calls no part of the case: bounds a loaded machine does not overrun (the
    // server config's 200 ms did: "no connection to Redis within 200 ms").
    const peer = new RedisFleetStore(redis.config(P, { node_ttl_ms: 60_000, timeout: 2000 }), 'Y');
    try {
      const ahead = Date.now() * 10 + 1e9;
      await redis.command(['SET', `${P}fence`, String(ahead)]);
      const fence = await owes.beginLoad(U1, 'b', Date.now(), 4, 60_000);
      expect(fence).toBe(ahead + 1);
      expect(await owes.finishLoad(U1, 'b', fence!, true, Date.now())).toBe(true);
      const u = await peer.beginUnload(U1, 'b', Date.now(), 60_000);
      expect(u).not.toBeNull();
      expect(await peer.finishUnload(U1, 'b', u!, true, Date.now())).toBe(true);
      // The writes since were lost: the counter goes back.
      await redis.command(['SET', `${P}fence`, String(ahead)]);
      expect(await holds.beginLoad(U1, 'b', Date.now(), 4, 60_000)).toBe(fence);
      return fence!;
    } finally {
      await peer.close();
    }
  }

  it.each([
    ['the draining predecessor', 'pred'],
    ['the successor', 'next'],
  ] as const)(
    'is not sent by %s: the lock under way stays the other’s',
    async (_who, owing) => {
      const P = `r58-${owing}:`;
      await redis.command(['FLUSHALL']);
      const pred = node(P, 'X');
      const next = node(P, 'X');
      try {
        await pred.s.upsertReplica(vllmSpec(U1));
        await pred.s.applySnapshot(U1, snapshotWithA(Date.now()));
        // A changed timeout: same state, same node id; the predecessor keeps draining.
        await next.s.succeed(pred.s);
        await next.s.upsertReplica(vllmSpec(U1));
        const [owes, holds] = owing === 'pred' ? [pred.s, next.s] : [next.s, pred.s];
        const fence = await handedOutAgain(P, owes, holds);
        // The one that owes the end finds the state lost (its heartbeat) and replays what it owes.
        await heartbeatFoundStateLost(owes);
        expect(await stateIn(P, 'b')).toBe('loading');
        expect(await holds.finishLoad(U1, 'b', fence, true, Date.now())).toBe(true);
        expect(await stateIn(P, 'b')).toBe('loaded');
      } finally {
        await pred.s.close();
        await next.s.close();
      }
    },
    30_000,
  );
});

describe('EndedLocks: a fence handed out again while its replay is on its way', () => {
  it('sends no end owed under it after that, in the replay under way either', async () => {
    const clock: Clock = { now: () => 1_000, after: () => () => undefined };
    const sent: string[] = [];
    let answer = () => {};
    const shared = {
      finishLoad: async (url: string, adapter: string, fence: number) => {
        sent.push(`${adapter} ${fence}`);
        if (sent.length === 1) await new Promise<void>((r) => (answer = r));
      },
    } as unknown as SharedStore;
    const locks = new EndedLocks(clock);
    for (const [adapter, fence] of [
      ['a', 7],
      ['b', 8],
    ] as const) {
      locks.begin(fence, 500);
      locks.end('load', U1, adapter, fence, true);
    }
    const replay = locks.replay(shared);
    // Another store of this node was granted fence 8 while the end under 7 was on its way.
    locks.handedOutAgain(8);
    answer();
    await replay;
    expect(sent).toEqual(['a 7']);
  });
});

describe('a poll round under way when its runtime is replaced on the same state', () => {
  // Review 57 kept such a round from ticking the replaced runtime's prefetcher; its poll listener
  // still trimmed there. On the same state nothing keeps the replaced runtime from unloading (its
  // successor's leases are in its store), so the trim went on: once the runtime had handed over (no
  // lock open then), its unload lock could be granted in the store about to close, and the end went
  // nowhere (`unloading` to every node until the lock's TTL), the replica's adapter unloaded
  // meanwhile. The successor polls the same replicas and trims on its own rounds.
  it('trims nothing on the replaced runtime', async () => {
    const P = 'r58-trim:';
    await redis.command(['FLUSHALL']);
    let release = () => {};
    const held = new Promise<void>((r) => (release = r));
    let scrapes = 0;
    // Two adapters on a replica limited to one: a poll that reads them asks for a trim.
    const scrape = async (): Promise<Scrape> => {
      scrapes++;
      await held;
      return {
        load: { running: 0, waiting: 0, kvUsage: 0.1, activeAdapters: [], malformedLines: 0 },
        registry: [
          { name: 'a', path: '/adapters/a' },
          { name: 'b', path: '/adapters/b' },
        ],
      };
    };
    const api = { scrape } as unknown as ReplicaApi;
    // The successor's own polls find nothing: only the replaced runtime's round is looked at.
    const quiet = {
      scrape: async () => {
        throw new Error('no answer');
      },
    } as unknown as ReplicaApi;
    const config = (timeout: number) => redis.config(P, { node_ttl_ms: 60_000, timeout });
    const old = new FleetRuntime({
      redis: config(2000),
      leasePrefix: 'X',
      api,
      log: silentLogger,
      poller: { intervalMs: 10, jitter: 0 },
    });
    const next = new FleetRuntime({
      redis: config(2500),
      leasePrefix: 'X',
      leaseSeq: old.leaseSeq,
      api: quiet,
      log: silentLogger,
      poller: { intervalMs: 60_000, jitter: 0 },
    });
    try {
      new RouterService(
        parseRouterConfig({
          replicas: [{ url: U1 }],
          base_model: 'base',
          adapter_path_template: '/adapters/{name}',
          max_loaded_adapters: 1,
        }),
        old,
      );
      await waitFor(() => scrapes > 0, 5000, 'a round under way');
      let trims = 0;
      old.manager.trim = async () => void trims++;
      let roundEnded = false;
      old.poller.addRoundListener(() => (roundEnded = true));
      const retiring = old.retire(next);
      release();
      await retiring;
      await waitFor(() => roundEnded, 5000, 'the round ended');
      // A trim after the poll, once begun, is under way until its views are read and it ran.
      const underWay = (old.pollTrim as unknown as { underWay: Map<string, Promise<void>> }).underWay;
      await waitFor(() => underWay.size === 0, 10_000, 'no trim under way');
      expect(trims).toBe(0);
    } finally {
      release();
      old.stop();
      next.stop();
      await old.store.close?.();
      await next.store.close?.();
    }
  }, 30_000);
});
