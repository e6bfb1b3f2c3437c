import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import type { Lease, ReplicaSnapshot } from '../../src/fleet/types';
import { LeaseHandle } from '../../src/lease';
import { silentLogger } from '../../src/log';
import { FleetRuntime } from '../../src/runtime';
import { RedisServer } from '../../harness/redis/server';
import { TcpProxy } from '../../harness/net/tcp-proxy';

/** The one replica these suites register. */
export const U = 'http://10.0.0.1:8000';
export const SPEC = { url: U, backend: 'vllm' as const, priority: 0 };

/**
 * Fleet runtimes over one real redis-server for a suite (call at the top level): the server and
 * a client of the test's own, runtimes and TCP hops stopped after each test, and the small
 * builders the hand-over and lease suites share.
 */
export function redisRuntimes(tag: string) {
  let redis: RedisServer;
  let admin: Redis;
  const runtimes: FleetRuntime[] = [];
  const proxies: TcpProxy[] = [];
  beforeAll(async () => {
    redis = await RedisServer.start();
    admin = new Redis({ host: '127.0.0.1', port: redis.port, lazyConnect: true });
    admin.on('error', () => {});
    await admin.connect();
  });
  afterEach(async () => {
    for (const rt of runtimes.splice(0)) rt.stop();
    await Promise.all(proxies.splice(0).map((p) => p.close()));
  });
  afterAll(async () => {
    admin.disconnect();
    await redis.close();
  });
  return {
    get redis() {
      return redis;
    },
    get admin() {
      return admin;
    },
    prefix: () => `${tag}${randomBytes(4).toString('hex')}:`,
    poll: (): ReplicaSnapshot => ({
      at: Date.now(),
      ok: true,
      load: { running: 0, waiting: 0, kvUsage: 0.1, activeAdapters: [], malformedLines: 0 },
      registry: [{ name: 'a', path: '/adapters/a' }],
      managed: () => true,
    }),
    /** A runtime stopped after the test. */
    track<T extends FleetRuntime>(rt: T): T {
      runtimes.push(rt);
      return rt;
    },
    runtime(o: ConstructorParameters<typeof FleetRuntime>[0]): FleetRuntime {
      const rt = new FleetRuntime({ log: silentLogger, ...o });
      runtimes.push(rt);
      return rt;
    },
    /** A TCP hop to the server, closed after the test. */
    async proxy(): Promise<TcpProxy> {
      const p = await TcpProxy.start(redis.port);
      proxies.push(p);
      return p;
    },
    lease: (rt: FleetRuntime): Lease => ({ id: rt.nextLeaseId(), url: U, adapter: 'a', at: Date.now() }),
    /** A request's lease on adapter 'a' of U, taken on `rt` as admission takes it. */
    take: async (rt: FleetRuntime) => (await LeaseHandle.take(rt, U, 'a')).lease,
    /** Open lease ids in Redis under prefix `p`, read by the test's own client. */
    openIn: async (p: string) => (await admin.hkeys(`${p}lease`)).sort(),
  };
}
