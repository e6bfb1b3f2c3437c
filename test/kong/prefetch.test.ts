/**
 * Placement ahead of demand (`prefetch`) through the real plugin server, simulated vLLM replicas
 * on loopback: the poller's timer loads a demanded adapter on a replica with a free slot before
 * any request for it goes there; it never unloads an adapter with a request in flight; its budget
 * bounds it; and two plugin servers sharing Redis do not load one adapter twice.
 */
import { randomBytes } from 'node:crypto';
import type { KongDriver } from '../../harness/kong/driver';
import { KongDriver as Driver, PluginServerProcess } from '../../harness/kong/driver';
import { RedisServer } from '../../harness/redis/server';
import { waitFor } from '../../harness/wait';
import { SimFleet } from '../../sim/fleet';
import { LocalGateway } from '../../stack/gateway';
import { chatBody, onDemand, PLUGINS_DIR, startWorld, usePluginServer, vllm } from './world';

let driver: KongDriver;
usePluginServer((_s, d) => {
  driver = d;
});

const PREFETCH = { prefetch: true, prefetch_interval_ms: 500 };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('prefetch, through the plugin server', () => {
  let w: Awaited<ReturnType<typeof startWorld>> | undefined;
  afterEach(async () => {
    await w?.stop();
    w = undefined;
  });

  it('loads a demanded adapter on a free slot before a request for it goes there, within its budget', async () => {
    // Three replicas with two slots each; every request asks for `hot`: its target is three copies.
    w = await startWorld(driver, [vllm(), vllm(), vllm()], (u) =>
      onDemand(u, { ...PREFETCH, prefetch_loads_per_minute: 1 }),
    );
    // One request: `hot` lands on one replica, which serves it (a tick may come during its load).
    expect((await w.chat('hot')).status).toBe(200);
    const holders = () => [0, 1, 2].filter((i) => w!.loads(i, 'hot').length > 0);
    const served = () => [0, 1, 2].filter((i) => w!.fleet.replicas[i]!.engine.stats().finishedRequests > 0);
    // No request meanwhile: the poller's tick makes a second copy, on a replica no request went to.
    // A plan needs a freshly polled replica with nothing waiting: on a loaded machine the polls lag
    // (CI's Node 22 stage once took over 10 s), so this waits longer; what it asserts is unchanged.
    await waitFor(() => holders().length === 2, 30_000);
    expect(served()).toHaveLength(1);
    expect(holders().filter((i) => !served().includes(i))).toHaveLength(1);
    // One prefetch a minute: the third replica gets no copy over several more ticks.
    await sleep(2500);
    expect(holders()).toHaveLength(2);
    for (const i of [0, 1, 2]) expect(w.loads(i, 'hot').length).toBeLessThanOrEqual(1);
  });

  it('never unloads an adapter with a request in flight; once it is idle, a far colder one makes room', async () => {
    // One slot; `cold` is busy with a long request while `hot` is asked for (and refused: no room).
    // No hold in the gateway: a request for `hot` is refused at once while `cold` runs.
    w = await startWorld(driver, [vllm({ timeScale: 10, engine: { decodeMsPerStep: 200 } })], (u) =>
      onDemand(u, {
        ...PREFETCH,
        max_loaded_adapters: 1,
        queue_timeout_ms: 100,
        ttft_slo_ms: 0,
        prefetch_hysteresis: 0.5,
      }),
    );
    // 500 decode steps of 200 ms at time scale 10: 10 s.
    const long = w.chat('cold', 500);
    await waitFor(() => w!.fleet.replicas[0]!.engine.stats().running === 1);
    for (let i = 0; i < 12; i++) expect([429, 503]).toContain((await w.chat('hot')).status);
    // Ticks go by while `cold` runs: no unload.
    await sleep(1500);
    const unloads = () => w!.fleet.replicas[0]!.adapterLog().filter((e) => e.op === 'unload');
    expect(w.fleet.replicas[0]!.engine.stats().running).toBe(1);
    expect(unloads()).toEqual([]);
    expect((await long).status).toBe(200);
    // Idle now, and asked for once against twelve (past the factor of 8): prefetch swaps it for `hot`.
    await waitFor(() => w!.loads(0, 'hot').length === 1, 20_000);
    expect(unloads().map((e) => [e.name, e.inFlight])).toEqual([['cold', 0]]);
  });
});

describe('prefetch on two plugin servers sharing Redis', () => {
  let redis: RedisServer;
  const servers: PluginServerProcess[] = [];
  const nodes: { driver: Driver; router: LocalGateway; status: LocalGateway }[] = [];
  let fleet: SimFleet | undefined;
  beforeAll(async () => {
    redis = await RedisServer.start();
  });
  afterAll(async () => {
    for (const n of nodes) {
      await n.router.close();
      await n.status.close();
      n.driver.close();
    }
    for (const server of servers) await server.stop();
    await fleet?.stop();
    await redis.close();
  });

  // It failed 2 runs in 9 (it was skipped at 0b9d50f): a tick planned `hot` on every replica, the
  // load on the replica a request was loading it on spent the one unit of the minute and joined
  // that load, the others were refused: no second copy for a minute. test/core/prefetch.test.ts
  // ("leaves its budget to the next planned copy") is that schedule.
  it('do not load one adapter twice, and share one budget', async () => {
    // The replicas and both plugin servers start together (most of this case's time, loaded).
    await Promise.all([
      SimFleet.start([vllm(), vllm(), vllm()]).then((f) => (fleet = f)),
      ...[0, 1].map(async () => servers.push(await PluginServerProcess.start({ pluginsDir: PLUGINS_DIR }))),
    ]);
    const urls = fleet!.urls;
    // Redis calls get 2 s, not the harness's 200 ms: on a loaded machine one slow call left a node
    // deciding alone, and a node alone that has not yet counted the fleet's nodes grants no cold
    // load (the first request's 429 in 3 runs of 13): the outage budget, not what this tests.
    const shared = redis.config(`pf${randomBytes(4).toString('hex')}:`, { timeout: 2000 });
    for (const server of servers) {
      const d = new Driver(server.socketPath);
      const router = await LocalGateway.create({
        driver: d,
        plugins: [
          {
            name: 'lora-router',
            config: onDemand(urls, { ...PREFETCH, prefetch_loads_per_minute: 1, redis: shared }),
          },
        ],
        serviceUrl: urls[0]!,
      });
      const status = await LocalGateway.create({
        driver: d,
        plugins: [{ name: 'lora-poller', config: { poll_interval_ms: 50, timeout_ms: 500, redis: shared } }],
        serviceUrl: 'http://127.0.0.1:9',
      });
      nodes.push({ driver: d, router, status });
    }
    const chat = (n: number) =>
      nodes[n]!.router.handle({
        path: '/v1/chat/completions',
        headers: { 'content-type': 'application/json' },
        body: chatBody('hot', 10, 2),
      });
    // Both nodes have heard from Redis (a node that never has grants no cold load).
    for (const n of nodes)
      await waitFor(async () => {
        const m = (await n.status.handle({ method: 'GET', path: '/lora/metrics' })).body.toString();
        return /^lora_router_shared_state_up 1$/m.test(m);
      }, 10_000);
    // Both nodes see the demand (their own trackers), each would plan two more copies.
    for (let i = 0; i < 6; i++) {
      const r = await chat(i % 2);
      expect(`${r.status} ${r.body.toString()}`).toMatch(/^200 /);
    }
    const loads = (i: number) =>
      fleet!.replicas[i]!.adapterLog().filter((e) => e.op === 'load' && e.name === 'hot');
    const holders = () => [0, 1, 2].filter((i) => loads(i).length > 0);
    // A plan needs a freshly polled replica with nothing waiting: on a loaded machine the polls lag
    // (CI's Node 22 stage once took over 10 s), so this waits longer; what it asserts is unchanged.
    await waitFor(() => holders().length === 2, 30_000).catch((err: Error) => {
      // What each node did with `hot`: the plugin servers' log says why a copy did not come.
      const said = servers.map((s, i) => `node ${i}:\n${s.log.filter((l) => l.includes('hot')).join('\n')}`);
      throw new Error(`${err.message}\n${said.join('\n')}`);
    });
    // Several ticks on each node: one budget of one prefetch a minute for both.
    await sleep(2500);
    expect(holders()).toHaveLength(2);
    for (const i of [0, 1, 2]) expect(loads(i).length).toBeLessThanOrEqual(1);
  }, 60_000);
});
