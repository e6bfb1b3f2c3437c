/**
 * An acquire that timed out, over a real redis-server: the store decided alone (`uncertain`), but
 * ioredis leaves the command on its connection (v5.11.1, lib/Command.ts `setTimeout` only rejects
 * the caller's promise), so it may still run in Redis. Its release must not overtake it: sent over
 * a successor's link (`adopt` replays a store's pending releases there), it landed first, and the
 * acquire then opened a lease for a request that had ended, pinning its adapter until
 * lease_max_age_ms. The same shape as review-61.test.ts's retakes.
 */
import { Redis } from 'ioredis';
import { redisOptions } from '../../src/fleet/redis/connection';
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import type { Lease } from '../../src/fleet/types';
import { silentLogger } from '../../src/log';
import { TcpProxy } from '../../harness/net/tcp-proxy';
import { useRedisStores } from '../helpers/redis-stores';
import { vllmSpec } from './helpers';
import { LEASE_TAKES, startStoreLine, U1 } from './store-line';

const stores = useRedisStores();

// S's link is slowed to 0.6 s as the lease is taken, S's timeout is 0.15 s: S decides alone, its
// command still on the link. The request ends, S is retired (same state) and N adopts it: N sends
// the release over its own link, ahead of the acquire still on S's.
describe.each(LEASE_TAKES)(
  "a lease whose %s timed out, released once its store's successor adopts it",
  (name, take) => {
    it('leaves no lease of the node in the shared state once the acquire lands', async () => {
      const line = await startStoreLine(stores.redis, `overtake-${name}:`, { timeoutMs: 150, cutP: false });
      const lease: Lease = { id: 'X-2', url: U1, adapter: null, at: Date.now() };
      try {
        line.slowLink.delay(600);
        await take(line.s, lease);
        expect(line.s.mode?.()).toBe('local');
        await line.s.release(lease.id, Date.now());
        expect(await line.leaseKeysOnceAdopted(1200)).toEqual([]);
      } finally {
        await line.close();
      }
    }, 30_000);
  },
);

// An acquire answered after a reclaim began is taken again once that reclaim ends (`takeAgain`,
// dst seed 609813). That retake over S's slowed link gets no answer: S decides alone from then on,
// the lease's release waits for a replay, and N adopts it and sends it over its own link, ahead of
// the retake. S's acquire is held until the reclaim has ended, so the reclaim itself never sees it.
describe('a lease whose retake after a reclaim timed out, released once its store is adopted', () => {
  it('leaves no lease of the node in the shared state once the retake lands', async () => {
    const line = await startStoreLine(stores.redis, 'overtake-again:', { timeoutMs: 150, cutP: false });
    const lease: Lease = { id: 'X-2', url: U1, adapter: null, at: Date.now() };
    const acquire = line.sShared.acquire.bind(line.sShared);
    const retake = line.sShared.retake.bind(line.sShared);
    let reclaimEnded = (): void => undefined;
    const reclaimed = new Promise<void>((r) => (reclaimEnded = r));
    line.sShared.acquire = async (l: Lease) => {
      await reclaimed;
      return acquire(l);
    };
    let retakes = 0;
    line.sShared.retake = (leases: readonly Lease[]) => {
      if (!leases.some((l) => l.id === lease.id)) return retake(leases);
      retakes++;
      line.slowLink.delay(600);
      return retake(leases);
    };
    try {
      const taken = line.s.acquire(lease);
      await line.emptyState(); // S's reclaim begins while the acquire is under way
      await line.s.handBackEnded(); // ... and has ended
      reclaimEnded();
      await taken;
      expect(retakes).toBe(1);
      expect(line.s.mode?.()).toBe('local');
      await line.s.release(lease.id, Date.now());
      expect(await line.leaseKeysOnceAdopted(1200)).toEqual([]);
    } finally {
      await line.close();
    }
  }, 30_000);
});

// Its store's own recovery takes it again over the same link, and answered: the acquire has run
// there by then (one connection answers in order), so the release is sent once, with the upstream's
// status, as any shared lease's. Sent behind the acquire as well, the release there found the lease
// gone and answered nothing (the status not counted).
describe("a lease whose acquire timed out, taken again by its store's recovery over that link", () => {
  it('is released once, with its status', async () => {
    await stores.redis.command(['FLUSHALL']);
    const link = await TcpProxy.start(stores.redis.port);
    const cfg = stores.redis.config('overtake-recovered:', { node_ttl_ms: 60_000, timeout: 300 });
    const store = new FailoverFleetStore(
      new RedisFleetStore({ ...cfg, port: link.port }, 'X'),
      silentLogger,
      {
        probeMs: 50,
        logEveryMs: 60_000,
      },
    );
    const lease: Lease = { id: 'X-3', url: U1, adapter: null, at: Date.now() };
    try {
      await store.upsertReplica(vllmSpec(U1));
      link.delay(1000);
      await store.acquire(lease);
      expect(store.mode()).toBe('local');
      link.delay(0);
      await new Promise<void>((r) => (store.onSharedAgain = r));
      expect(await store.release(lease.id, Date.now(), 500)).toMatchObject({ id: lease.id });
      expect(await stores.redis.command(['HKEYS', 'overtake-recovered:lease'])).toEqual([]);
    } finally {
      await store.close();
      await link.close();
    }
  }, 30_000);
});

// What the fix leans on when a link drops: ioredis (v5.11.1, our options: maxRetriesPerRequest 0)
// rejects the commands still on a closed connection and resends none after it reconnects
// (lib/redis/event_handler.ts `closeHandler`: `prevCommandQueue` is the command queue that
// `flushQueue` empties at once). So a command on a dropped link ran before the drop or never, and
// a release replayed over a new connection cannot be overtaken by it.
describe('a command on a connection that drops before it reaches Redis', () => {
  it('is not sent again once ioredis has reconnected', async () => {
    const link = await TcpProxy.start(stores.redis.port);
    const client = new Redis(
      redisOptions({ ...stores.redis.config('resend:'), port: link.port, timeout: 5000 }),
    );
    client.on('error', () => {});
    const ready = () => new Promise((r) => client.once('ready', r));
    try {
      await ready();
      link.delay(60_000); // held in the proxy, dropped with the link
      const sent = client.set('resend:k', 'late');
      await new Promise((r) => setImmediate(r)); // written (auto-pipelined calls go out on a later tick)
      link.cut('refuse');
      await expect(sent).rejects.toThrow();
      const again = ready();
      link.restore();
      await again;
      await client.ping(); // answered after anything resent on this connection
      expect(await stores.redis.command(['GET', 'resend:k'])).toBeNull();
    } finally {
      client.disconnect();
      await link.close();
    }
  }, 30_000);
});
