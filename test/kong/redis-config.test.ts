/**
 * The `redis` record as Kong hands it to the real plugin server: secret references resolved
 * (with the `$refs` key Kong adds inside the nested record), deprecated names, and a Redis the
 * plugins cannot use (Cluster) refused with a clear error. Real redis-server, real plugin
 * server driven as Kong drives it (driver.ts), simulated vLLM replicas on loopback.
 */
import { randomBytes } from 'node:crypto';
import { LocalGateway } from '../../stack/gateway';
import { SimFleet } from '../../sim/fleet';
import { RedisServer } from '../../harness/redis/server';
import { waitFor } from '../../harness/wait';
import { KongDriver, PluginServerProcess } from '../../harness/kong/driver';
import { BASE, PLUGINS_DIR, json, vllm } from './world';

let server: PluginServerProcess;
let driver: KongDriver;
let fleet: SimFleet | undefined;
let redis: RedisServer | undefined;
const gateways: LocalGateway[] = [];

beforeAll(async () => {
  server = await PluginServerProcess.start({ pluginsDir: PLUGINS_DIR });
  driver = new KongDriver(server.socketPath);
});
afterEach(async () => {
  for (const g of gateways.splice(0)) await g.close();
  await fleet?.stop();
  fleet = undefined;
  await redis?.close();
  redis = undefined;
});
afterAll(async () => {
  driver.close();
  await server.stop();
});

/** lora-router on a service routed to `fleet`, and lora-poller's status route, both with `redisRecord`. */
async function world(redisRecord: Record<string, unknown>) {
  fleet = await SimFleet.start([vllm()]);
  const router = await LocalGateway.create({
    driver,
    plugins: [
      {
        name: 'lora-router',
        config: {
          replicas: fleet.urls.map((url) => ({ url })),
          base_model: BASE,
          adapter_path_template: '/adapters/{name}',
          max_loaded_adapters: 2,
          redis: redisRecord,
        },
      },
    ],
    serviceUrl: fleet.urls[0]!,
  });
  const status = await LocalGateway.create({
    driver,
    plugins: [{ name: 'lora-poller', config: { poll_interval_ms: 50, redis: redisRecord } }],
    serviceUrl: 'http://127.0.0.1:9',
  });
  gateways.push(router, status);
  const chat = (model: string) =>
    router.handle({
      path: '/v1/chat/completions',
      headers: { 'content-type': 'application/json' },
      body: Buffer.from(
        JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 }),
      ),
    });
  const statusJson = async () => json((await status.handle({ method: 'GET', path: '/lora/status' })).body);
  return { router, status, chat, statusJson };
}

describe('the redis record as Kong sends it', () => {
  it('takes a {vault://...} password (Kong resolves it and adds redis.$refs beside it) and shares state in a Redis that requires it', async () => {
    const password = randomBytes(8).toString('hex');
    redis = await RedisServer.start({ password });
    process.env.KLR_TEST_REDIS_PASSWORD = password;
    const w = await world({
      host: '127.0.0.1',
      port: redis.port,
      password: '{vault://env/klr-test-redis-password}',
      prefix: `vault${randomBytes(4).toString('hex')}:`,
    });
    // What Kong sends: the secret in place of the reference, the reference in `$refs`.
    const sent = w.router.configs[0]!.conf.redis as Record<string, unknown>;
    expect(sent.password).toBe(password);
    expect(sent.$refs).toEqual({ password: '{vault://env/klr-test-redis-password}' });
    const r = await w.chat('a');
    expect({ status: r.status, body: r.status === 200 ? '' : r.body.toString() }).toEqual({
      status: 200,
      body: '',
    });
    await waitFor(
      async () => (await w.statusJson()).store === 'redis',
      5000,
      'the poller sharing state in Redis',
    );
    expect((await w.statusJson()).inFlight).toBe(0);
  });

  it('refuses a Redis Cluster node with an error naming the mode, and keeps serving on local decisions', async () => {
    redis = await RedisServer.start({ args: ['--cluster-enabled', 'yes'] });
    const logged = server.log.length;
    const w = await world({
      host: '127.0.0.1',
      port: redis.port,
      prefix: `cl${randomBytes(4).toString('hex')}:`,
    });
    // Deciding alone, it serves what needs no load; it starts no cold load, for it has never seen
    // the fleet whose budget it would share (docs/reliability.md, the cold-load budget).
    expect((await w.chat(BASE)).status).toBe(200);
    await waitFor(async () => (await w.statusJson()).store === 'local', 5000, 'the node deciding alone');
    const cold = await w.chat('a');
    expect([cold.status, json(cold.body).error.code]).toEqual([429, 'rate_limit_exceeded']);
    // Said once, at the first look at the server (a call may have timed out before: the store then degraded already).
    let said: string[] = [];
    await waitFor(
      // The refusal's own line; the node's switch to local decisions quotes it as its cause too.
      () =>
        (said = server.log
          .slice(logged)
          .filter((l) => /Redis Cluster/.test(l) && !/shared fleet state unavailable/.test(l))).length > 0,
      5000,
      'the refusal in the log',
    );
    expect(said).toEqual([
      expect.stringMatching(
        /Redis Cluster is not supported: 127\.0\.0\.1:\d+ runs in cluster mode \(cluster_enabled:1\).*Use a standalone Redis, or Sentinel/,
      ),
    ]);
  });

  it('warns once about the deprecated timeout_ms, and refuses it beside a different timeout', async () => {
    redis = await RedisServer.start();
    const logged = server.log.length;
    const prefix = `dep${randomBytes(4).toString('hex')}:`;
    const w = await world({ host: '127.0.0.1', port: redis.port, prefix, timeout_ms: 1500 });
    for (let i = 0; i < 3; i++) expect((await w.chat('a')).status).toBe(200);
    const warned = server.log.slice(logged).filter((l) => /deprecated/.test(l));
    expect(warned).toEqual([
      expect.stringMatching(
        /warn: lora plugins: config\.redis\.timeout_ms is deprecated, use config\.redis\.timeout instead/,
      ),
    ]);
    await w.router.configure([
      {
        name: 'lora-router',
        config: {
          replicas: fleet!.urls.map((url) => ({ url })),
          redis: { host: '127.0.0.1', port: redis.port, prefix, timeout: 500, timeout_ms: 1500 },
        },
      },
    ]);
    const r = await w.chat('a');
    expect(r.status).toBe(500);
    expect(json(r.body).error.message).toMatch(
      /config\.redis\.timeout_ms: deprecated alias of timeout, set to a different value \(timeout_ms: 1500, timeout: 500\): keep only timeout/,
    );
  });
});
