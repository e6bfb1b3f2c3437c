/**
 * A route moved to another `redis` record with other replicas, through the real plugin server
 * (Kong's `__plugin_id` and `__seq__` as Kong sends them: harness/kong/driver.ts): lora-router and
 * lora-poller move from database 0 and replica R1 to database 1 and replica R2. Nothing takes R1
 * over; past the lapse grace the runtime left on database 0 retires: R1 is polled no more and the
 * node leaves database 0's live nodes (test/core/record-move.test.ts has the cases around it).
 *
 * The grace is the longest `lease_max_age_ms` (10 minutes by default): the server's clock is moved
 * ahead past it (test/helpers/clock-jump.cjs, SIGUSR2), its timers still waiting real time.
 */
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { KongDriver, PluginServerProcess } from '../../harness/kong/driver';
import { RedisServer } from '../../harness/redis/server';
import { waitFor } from '../../harness/wait';
import { LocalGateway } from '../../stack/gateway';
import { countingReplica as replica } from '../helpers/counting-replica';
import { PLUGINS_DIR } from './world';

const JUMP_MS = 11 * 60_000;
const PREFIX = 'move:';

/** Whether `r` is called in the next second. */
async function polled(r: { hits: number }): Promise<boolean> {
  const before = r.hits;
  await new Promise((res) => setTimeout(res, 1000));
  return r.hits > before;
}

it('a route and its lora-poller moved to another database and other replicas: the runtime left retires past the grace', async () => {
  const redis = await RedisServer.start();
  const server = await PluginServerProcess.start({
    pluginsDir: PLUGINS_DIR,
    nodeArgs: ['--require', join(__dirname, '..', 'helpers', 'clock-jump.cjs')],
    env: { CLOCK_JUMP_MS: String(JUMP_MS) },
  });
  const driver = new KongDriver(server.socketPath);
  const [r1, r2] = [await replica(), await replica()];
  const admins = [0, 1].map((db) => new Redis({ port: redis.port, db, lazyConnect: true }));
  const nodes = (db: number) => admins[db]!.zrange(`${PREFIX}nodes`, 0, -1);
  const db = (database: number) => redis.config(PREFIX, { database, timeout: 2000 });
  const router = (database: number, url: string) => ({
    name: 'lora-router',
    config: { base_model: 'base', replicas: [{ url }], redis: db(database) },
  });
  const poller = (database: number) => ({
    name: 'lora-poller',
    config: { poll_interval_ms: 50, jitter: 0, redis: db(database) },
  });
  const service = await LocalGateway.create({
    driver,
    plugins: [router(0, r1.url)],
    serviceUrl: r1.url,
    workers: 1,
  });
  const status = await LocalGateway.create({
    driver,
    plugins: [poller(0)],
    serviceUrl: 'http://127.0.0.1:9',
    workers: 1,
  });
  // Each worker starts an instance on its first request through the configuration.
  const touch = async () => {
    await status.handle({ method: 'GET', path: '/lora/status' });
    await service.handle({
      path: '/v1/chat/completions',
      headers: { 'content-type': 'application/json' },
      body: Buffer.from(JSON.stringify({ model: 'a', messages: [{ role: 'user', content: 'hi' }] })),
    });
  };
  try {
    for (const a of admins) await a.connect();
    await touch();
    await waitFor(async () => (await nodes(0)).length === 1, 10_000, 'a node on database 0');
    // The operator moves the route and its poller to database 1, on another replica.
    await service.configure([router(1, r2.url)]);
    await status.configure([poller(1)]);
    await touch();
    await waitFor(async () => (await nodes(1)).length === 1, 10_000, 'a node on database 1');
    // Within the grace a worker may still route through the old configuration: kept.
    expect({ r1: await polled(r1), db0: (await nodes(0)).length }).toEqual({ r1: true, db0: 1 });
    server.child.kill('SIGUSR2');
    await waitFor(async () => (await nodes(0)).length === 0, 10_000, 'database 0 left').catch(() => {});
    expect({
      r1: await polled(r1),
      r2: await polled(r2),
      db0: await nodes(0),
      db1: (await nodes(1)).length,
    }).toEqual({ r1: false, r2: true, db0: [], db1: 1 });
  } finally {
    await service.close();
    await status.close();
    driver.close();
    await server.stop();
    for (const a of admins) a.disconnect();
    await r1.close();
    await r2.close();
    await redis.close();
  }
}, 90_000);
