/**
 * Three stores of node X on one redis-server state, each the successor of the one before (runtimes
 * retired for a same-state record change, a `timeout_ms` say): P, then S, then N. P's link can be
 * cut (it decides alone), S's slowed or held; N's is direct. The hand-back's cases run on it
 * (hand-back-close.test.ts, review-61.test.ts): S's reclaim re-takes P's lease over S's link, and N
 * adopts P and S, pruning over its own link.
 */
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import type { Lease } from '../../src/fleet/types';
import { silentLogger } from '../../src/log';
import { TcpProxy } from '../../harness/net/tcp-proxy';
import { waitFor } from '../../harness/wait';
import type { RedisServer } from '../../harness/redis/server';
import { vllmSpec } from './helpers';

export const U1 = 'http://10.0.0.1:8000';

/** The two calls that take a lease: alone, and with the views in one round trip. */
export const LEASE_TAKES: [string, (s: FailoverFleetStore, lease: Lease) => Promise<unknown>][] = [
  ['acquire', (s, lease) => s.acquire(lease)],
  ['viewsAndLease', (s, lease) => s.viewsAndLease([U1], undefined, lease)],
];

export interface StoreLine {
  p: FailoverFleetStore;
  s: FailoverFleetStore;
  n: FailoverFleetStore;
  /** P's link to Redis (through `cutLink` when `cutP`). */
  pShared: RedisFleetStore;
  /** S's link to Redis (through `slowLink`). */
  sShared: RedisFleetStore;
  cutLink: TcpProxy;
  slowLink: TcpProxy;
  /** P's lease, taken by `takeLease`. */
  lease: Lease;
  /** The lease ids open in Redis. */
  leaseKeys(): Promise<unknown>;
  /** P's lease taken (through P: alone when its link was cut). */
  takeLease(): Promise<void>;
  /** Told when S's retake of P's lease is sent (`delayMs`: S's link slowed just before). */
  onRetake(delayMs: number): Promise<void>;
  /**
   * Told when S's retake of P's lease is sent (`sent`) and when it fails (`unanswered`: no answer in
   * S's timeout): it, and all S sends after it, are held on S's link, short of Redis, until `retakeLands`. However slow the machine, the
   * retake runs after whatever the case sends over other links meanwhile, and S's calls before it
   * get the whole timeout (a link slowed to 0.6 s past a 0.15 s timeout was overrun by a loaded
   * machine's ordinary calls: S's reclaim failed before its retake, which was never sent).
   */
  onRetakeOnTheWire(): { sent: Promise<void>; unanswered: Promise<void> };
  /** S closed: the retake and what S sent after it land, in order; resolves once Redis has run them. */
  retakeLands(): Promise<void>;
  /**
   * As `onRetakeUnanswered`, but the retake lands at once and its reply is held on S's link until
   * `slowLink.restore()`: no answer in S's timeout however slow the machine, and S's calls before it
   * are not slowed (a link slowed past a short timeout was overrun by a loaded machine's ordinary calls).
   */
  onRetakeHeld(): Promise<void>;
  /** S's heartbeat finds the state emptied: its reclaim begins. */
  emptyState(): Promise<void>;
  /** P drains and N adopts it (FleetRuntime.closeStore, same state); then the same for S. */
  retireP(): Promise<void>;
  retireS(): Promise<void>;
  /** P and S retired in turn, then the lease ids open in Redis once `settleMs` has let late calls land. */
  leaseKeysOnceAdopted(settleMs: number): Promise<unknown>;
  close(): Promise<void>;
}

export async function startStoreLine(
  redis: RedisServer,
  prefix: string,
  o: { timeoutMs: number; cutP: boolean },
): Promise<StoreLine> {
  await redis.command(['FLUSHALL']);
  const cutLink = await TcpProxy.start(redis.port);
  const slowLink = await TcpProxy.start(redis.port);
  const cfg = redis.config(prefix, { node_ttl_ms: 60_000, timeout: o.timeoutMs });
  // No probe in a test's time: P's would wait out its cut link's timeout, S's retake landing meanwhile.
  const options = { probeMs: 60_000, logEveryMs: 60_000 };
  const pShared = new RedisFleetStore(o.cutP ? { ...cfg, port: cutLink.port } : cfg, 'X');
  const p = new FailoverFleetStore(pShared, silentLogger, options);
  const sShared = new RedisFleetStore({ ...cfg, port: slowLink.port }, 'X');
  const s = new FailoverFleetStore(sShared, silentLogger, options);
  const n = new FailoverFleetStore(new RedisFleetStore(cfg, 'X'), silentLogger, options);
  const lease: Lease = { id: 'X-1', url: U1, adapter: null, at: Date.now() };
  const retakeOf = (hook: (sent: Promise<string[]>) => void, slow: () => void) => {
    const retake = sShared.retake.bind(sShared);
    sShared.retake = (leases: readonly Lease[]) => {
      if (!leases.some((l) => l.id === lease.id)) return retake(leases);
      slow();
      const sent = retake(leases);
      hook(sent);
      return sent;
    };
  };
  const line: StoreLine = {
    p,
    s,
    n,
    pShared,
    sShared,
    cutLink,
    slowLink,
    lease,
    leaseKeys: () => redis.command(['HKEYS', `${prefix}lease`]),
    takeLease: async () => {
      await p.acquire(lease);
    },
    onRetake: (delayMs) =>
      new Promise((r) =>
        retakeOf(
          () => r(),
          () => slowLink.delay(delayMs),
        ),
      ),
    onRetakeOnTheWire: () => {
      let sent = () => {};
      let unanswered = () => {};
      retakeOf(
        (call) => {
          sent();
          void call.catch(() => unanswered());
        },
        () => slowLink.holdRequests(() => true),
      );
      return {
        sent: new Promise<void>((r) => (sent = r)),
        unanswered: new Promise<void>((r) => (unanswered = r)),
      };
    },
    retakeLands: async () => {
      slowLink.restore();
      // Redis reads a closed client's commands before its end, then closes its side (the link's end).
      await waitFor(() => slowLink.connections === 0, 10_000, "S's link ended");
    },
    onRetakeHeld: () =>
      new Promise((r) =>
        retakeOf(
          (sent) => void sent.catch(() => r()),
          () => slowLink.holdReplies(() => true),
        ),
      ),
    emptyState: async () => {
      await redis.command(['FLUSHALL']);
      sShared.onStateLost?.();
    },
    retireP: async () => {
      await p.ownCallsEnded();
      await n.adopt(p);
      await p.close();
    },
    retireS: async () => {
      await s.ownCallsEnded();
      await n.adopt(s);
      await s.close();
    },
    leaseKeysOnceAdopted: async (settleMs) => {
      await line.retireP();
      await line.retireS();
      await new Promise((r) => setTimeout(r, settleMs));
      return line.leaseKeys();
    },
    close: async () => {
      slowLink.restore();
      cutLink.restore();
      for (const store of [p, s, n]) await store.close();
      await slowLink.close();
      await cutLink.close();
    },
  };
  try {
    for (const store of [p, s, n]) await store.upsertReplica(vllmSpec(U1));
    await s.succeed(p);
    await n.succeed(s);
    if (o.cutP) cutLink.cut('refuse');
  } catch (err) {
    await line.close();
    throw err;
  }
  return line;
}
