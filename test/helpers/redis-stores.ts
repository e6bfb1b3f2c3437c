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
