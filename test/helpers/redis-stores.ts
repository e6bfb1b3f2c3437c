import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import type { FleetStore } from '../../src/fleet/store';
import { RedisServer } from '../../harness/redis/server';

/**
 * A redis-server for the whole test file, and the stores a test opens (push them on `open`:
 * they are closed after each test).
 */
export function useRedisStores(): { readonly redis: RedisServer; open: FleetStore[] } {
  let server: RedisServer | undefined;
  const open: FleetStore[] = [];
  beforeAll(async () => {
    server = await RedisServer.start();
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((s) => s.close?.()));
  });
  afterAll(async () => {
    await server?.close();
  });
  return {
    get redis() {
      if (!server) throw new Error('redis-server not started yet (use it inside a test)');
      return server;
    },
    open,
  };
}

/**
 * What Redis itself says of `adapter` on `url` under `prefix`: read by a reader of its own, as a
 * peer on that state reads it (undefined: not resident), not through a node under test. The reader
 * is no part of a case, so its bounds are wide: with the server config's 200 ms it found "no
 * connection to Redis within 200 ms" on a loaded machine (failover-review-58 under load).
 */
export async function stateInRedis(
  redis: RedisServer,
  prefix: string,
  url: string,
  adapter: string,
): Promise<string | undefined> {
  const reader = new RedisFleetStore(redis.config(prefix, { node_ttl_ms: 60_000, timeout: 2000 }), 'reader');
  try {
    return (await reader.views([url], { name: adapter }))[0]?.adapter?.state;
  } finally {
    await reader.close();
  }
}
