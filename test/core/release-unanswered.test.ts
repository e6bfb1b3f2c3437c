/**
 * A lease whose acquire got no answer, given back, over a real redis-server: its release goes on
 * the acquire's link, behind it (acquire-overtake.test.ts), but the caller gets the local store's
 * answer without waiting for that link, which has just failed to answer. A router gave a guessed
 * lease back this way and waited for it before it proxied (router.ts `decide`, since not waited for:
 * guessed-giveback.test.ts): a request decided on a replica sat a whole timeout on the release, the
 * node polled the replica down meanwhile, and the request went there anyway (dst seed 1635447).
 */
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import type { Lease } from '../../src/fleet/types';
import { silentLogger } from '../../src/log';
import { TcpProxy } from '../../harness/net/tcp-proxy';
import { useRedisStores } from '../helpers/redis-stores';
import { vllmSpec } from './helpers';
import { LEASE_TAKES, U1 } from './store-line';

const stores = useRedisStores();

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

// The link is slowed to 0.6 s as the lease is taken, the timeout is 0.15 s: the store decides
// alone, the acquire still on the link, and the release goes behind it there.
describe.each(LEASE_TAKES)('a lease whose %s got no answer, given back', (name, take) => {
  it('is answered by the local store before its release on that link ends, and released there behind the acquire', async () => {
    await stores.redis.command(['FLUSHALL']);
    const prefix = `unanswered-${name}:`;
    const link = await TcpProxy.start(stores.redis.port);
    const cfg = stores.redis.config(prefix, { node_ttl_ms: 60_000, timeout: 150 });
    const shared = new RedisFleetStore({ ...cfg, port: link.port }, 'X');
    // No probe in the test's time: its recovery would take the lease again.
    const store = new FailoverFleetStore(shared, silentLogger, { probeMs: 60_000, logEveryMs: 60_000 });
    const lease: Lease = { id: 'X-4', url: U1, adapter: null, at: Date.now() };
    const ends: string[] = [];
    const onLink: Promise<unknown>[] = [];
    const release = shared.release.bind(shared);
    shared.release = (...a: Parameters<RedisFleetStore['release']>) => {
      const sent = release(...a);
      onLink.push(
        sent.then(
          () => ends.push('link answered'),
          () => ends.push('link failed'),
        ),
      );
      return sent;
    };
    try {
      await store.upsertReplica(vllmSpec(U1));
      link.delay(600);
      await take(store, lease);
      expect(store.mode()).toBe('local');
      expect(await store.release(lease.id, Date.now())).toMatchObject({ id: lease.id });
      ends.push('given back');
      expect(onLink).toHaveLength(1); // sent on the acquire's link
      await Promise.all(onLink);
      expect(ends).toEqual(['given back', 'link failed']);
      await pause(1000); // the acquire lands, then the release behind it
      expect(await stores.redis.command(['HKEYS', `${prefix}lease`])).toEqual([]);
    } finally {
      link.restore();
      await store.close();
      await link.close();
    }
  }, 30_000);
});
