/**
 * A `redis` record change under a request, through the real plugin server and a real
 * redis-server: the request begun on the old record logs with the old configuration, so Kong
 * starts an old-config instance (harness/kong/workers.ts `instanceId`, plugin.lua 3.9.3
 * `get_instance_id`) whose record the node has left. The node keeps deciding on the runtime the
 * change made: the next request's lease carries its node id (the lease id's prefix).
 */
import { randomBytes } from 'node:crypto';
import Redis from 'ioredis';
import type { KongDriver } from '../../harness/kong/driver';
import { RedisServer } from '../../harness/redis/server';
import { waitFor } from '../../harness/wait';
import { onDemand, startWorld, usePluginServer, vllm } from './world';

let driver: KongDriver;
usePluginServer((_s, d) => (driver = d));
let redis: RedisServer;
beforeAll(async () => {
  redis = await RedisServer.start();
});
afterAll(async () => {
  await redis.close();
});

it('an old-config log phase on the replaced record leaves the node on the runtime the change made', async () => {
  const prefix = `ocr${randomBytes(4).toString('hex')}:`;
  const [dbOld, dbNew] = [0, 1];
  const config = (database: number) => (urls: string[]) =>
    onDemand(urls, { redis: redis.config(prefix, { database, timeout: 2000 }), lease_max_age_ms: 5000 });
  const admins = [dbOld, dbNew].map((db) => new Redis({ host: '127.0.0.1', port: redis.port, db }));
  /** The node id of the lease open in `db` once one is (one request runs at a time there). */
  const leaseNode = async (db: number) => {
    let ids: string[] = [];
    await waitFor(
      async () => (ids = await admins[db]!.hkeys(`${prefix}lease`)).length === 1,
      10_000,
      `a lease in db ${db}`,
    );
    return ids[0]!.slice(0, ids[0]!.lastIndexOf('-'));
  };
  // The replica decodes slowly: a request is still under way when the test looks.
  const w = await startWorld(driver, [vllm({ timeScale: 1 })], config(dbOld), { workers: 1 });
  try {
    expect((await w.chat('a')).status).toBe(200);
    let slowDone = false;
    const slow = w.chat('a', 400).then((r) => ((slowDone = true), r));
    await leaseNode(dbOld);
    // The record changes to another database; the worker's next request starts the new instance.
    await w.service.configure([{ name: 'lora-router', config: config(dbNew)(w.fleet.urls) }]);
    const first = w.chat('a', 400);
    const node = await leaseNode(dbNew);
    expect(slowDone).toBe(false);
    // The slow request's log phase, with the old configuration, starts an old-config instance.
    expect((await slow).status).toBe(200);
    expect((await first).status).toBe(200);
    // The next request decides on the same runtime: the same node id.
    const next = w.chat('a', 400);
    expect({ node: await leaseNode(dbNew), open: await admins[dbOld]!.hlen(`${prefix}lease`) }).toEqual({
      node,
      open: 0,
    });
    expect((await next).status).toBe(200);
  } finally {
    await w.stop();
    for (const a of admins) a.disconnect();
  }
}, 60_000);
