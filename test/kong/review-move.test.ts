/**
 * Review of the record move, through the real plugin server (Kong's `__plugin_id` and `__seq__` as
 * Kong sends them: harness/kong/driver.ts): a request begun before a route moved from database 0
 * (replica R1) to database 1 (replica R2) logs after the runtime left on database 0 retired. Kong
 * starts an old-config instance for that log phase (harness/kong/workers.ts `instanceId`); it runs
 * on the moved route's runtime, which must not list R1 in database 1 (before: it registered the
 * old configuration there, listing and claiming R1 in the state it moved to).
 * The server's clock is moved past the lapse grace (test/helpers/clock-jump.cjs, SIGUSR2).
 */
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { KongDriver, PluginServerProcess } from '../../harness/kong/driver';
import { RedisServer } from '../../harness/redis/server';
import { waitFor } from '../../harness/wait';
import { LocalGateway } from '../../stack/gateway';
import { SimFleet } from '../../sim/fleet';
import { BASE, PLUGINS_DIR, onDemand, vllm } from './world';

const JUMP_MS = 11 * 60_000;
const PREFIX = 'rmove:';

it('the log phase of a request begun before the move, after the old runtime retired, lists nothing of R1 in database 1', async () => {
  const redis = await RedisServer.start();
  const server = await PluginServerProcess.start({
    pluginsDir: PLUGINS_DIR,
    nodeArgs: ['--require', join(__dirname, '..', 'helpers', 'clock-jump.cjs')],
    env: { CLOCK_JUMP_MS: String(JUMP_MS) },
  });
  const driver = new KongDriver(server.socketPath);
  // R1 decodes slowly: its request is still under way after the move and the jump.
  const [f1, f2] = [
    await SimFleet.start([vllm({ timeScale: 1, engine: { decodeMsPerStep: 50 } })]),
    await SimFleet.start([vllm()]),
  ];
  const [r1, r2] = [f1.urls[0]!, f2.urls[0]!];
  const admins = [0, 1].map((db) => new Redis({ port: redis.port, db, lazyConnect: true }));
  const nodes = (db: number) => admins[db]!.zrange(`${PREFIX}nodes`, 0, -1);
  const listed = (db: number) => admins[db]!.hkeys(`${PREFIX}spec`);
  const db = (database: number) => redis.config(PREFIX, { database, timeout: 2000 });
  const router = (database: number, url: string) => ({
    name: 'lora-router',
    config: { ...onDemand([url]), redis: db(database) },
  });
  const poller = (database: number) => ({
    name: 'lora-poller',
    config: { poll_interval_ms: 50, jitter: 0, redis: db(database) },
  });
  const service = await LocalGateway.create({ driver, plugins: [router(0, r1)], serviceUrl: r1, workers: 1 });
  const status = await LocalGateway.create({
    driver,
    plugins: [poller(0)],
    serviceUrl: 'http://127.0.0.1:9',
    workers: 1,
  });
  const chat = (maxTokens: number) =>
    service.handle({
      path: '/v1/chat/completions',
      headers: { 'content-type': 'application/json' },
      body: Buffer.from(
        JSON.stringify({ model: BASE, messages: [{ role: 'user', content: 'hi' }], max_tokens: maxTokens }),
      ),
    });
  try {
    for (const a of admins) await a.connect();
    await status.handle({ method: 'GET', path: '/lora/status' });
    expect((await chat(2)).status).toBe(200);
    await waitFor(async () => (await nodes(0)).length === 1, 10_000, 'a node on database 0');
    let slowDone = false;
    const slow = chat(200).then((r) => ((slowDone = true), r));
    await new Promise((r) => setTimeout(r, 200));
    // The operator moves the route and its poller to database 1, on another replica.
    await service.configure([router(1, r2)]);
    await status.configure([poller(1)]);
    await status.handle({ method: 'GET', path: '/lora/status' });
    expect((await chat(2)).status).toBe(200);
    await waitFor(async () => (await nodes(1)).length === 1, 10_000, 'a node on database 1');
    server.child.kill('SIGUSR2');
    // Past the grace the runtime left on database 0 retires at its next poll round; the slow
    // request's lease (its age on the wall clock, which did not jump) keeps it draining there.
    await new Promise((r) => setTimeout(r, 1500));
    const before = { slowDone, db0Nodes: (await nodes(0)).length };
    // Its log phase now: Kong starts an instance of the old configuration.
    expect((await slow).status).toBe(200);
    // Its lease back, the retiring runtime leaves database 0.
    await waitFor(async () => (await nodes(0)).length === 0, 10_000, 'database 0 left').catch(() => {});
    expect({ before, db1: await listed(1), db0Nodes: await nodes(0) }).toEqual({
      before: { slowDone: false, db0Nodes: 1 },
      db1: [r2],
      db0Nodes: [],
    });
  } finally {
    await service.close();
    await status.close();
    driver.close();
    await server.stop();
    for (const a of admins) a.disconnect();
    await f1.stop();
    await f2.stop();
    await redis.close();
  }
}, 90_000);
