/**
 * Several Kong nodes sharing fleet state in Redis: three real plugin-server processes, each
 * driven by its own Kong-side driver, one real redis-server, simulated vLLM replicas on
 * loopback. What one node decides, the others must respect.
 */
import { randomBytes } from 'node:crypto';
import { LocalGateway } from '../../stack/gateway';
import { SimFleet } from '../../sim/fleet';
import type { RedisConfig } from '../../src/config/redis-schema';
import { RedisServer } from '../../harness/redis/server';
import { waitFor } from '../../harness/wait';
import { KongDriver, PluginServerProcess } from '../../harness/kong/driver';
import { BASE, PLUGINS_DIR, vllm } from './world';

interface Node {
  server: PluginServerProcess;
  driver: KongDriver;
  router: LocalGateway;
  status: LocalGateway;
}

let redis: RedisServer;
let nodes: Node[] = [];
let fleet: SimFleet | undefined;

beforeAll(async () => {
  redis = await RedisServer.start();
});
afterEach(async () => {
  for (const n of nodes) {
    n.driver.close();
    await n.server.stop();
  }
  nodes = [];
  await fleet?.stop();
  fleet = undefined;
  // A test that stopped Redis and failed before starting it again.
  if (!redis.running) await redis.start();
});
afterAll(async () => {
  await redis.close();
});

/** Starts `n` Kong nodes (one plugin server each) routing to `urls` through one Redis. */
async function startNodes(
  n: number,
  urls: string[],
  over: Record<string, unknown> = {},
  redisOver: Partial<RedisConfig> = {},
): Promise<Node[]> {
  const shared = redis.config(`mn${randomBytes(4).toString('hex')}:`, redisOver);
  const routerConfig = {
    replicas: urls.map((url) => ({ url })),
    base_model: BASE,
    adapter_path_template: '/adapters/{name}',
    max_loaded_adapters: 4,
    redis: shared,
    ...over,
  };
  const started = await Promise.all(
    Array.from({ length: n }, async () => {
      const server = await PluginServerProcess.start({ pluginsDir: PLUGINS_DIR });
      const driver = new KongDriver(server.socketPath);
      const router = await LocalGateway.create({
        driver,
        plugins: [{ name: 'lora-router', config: routerConfig }],
        serviceUrl: urls[0]!,
      });
      const status = await LocalGateway.create({
        driver,
        plugins: [{ name: 'lora-poller', config: { poll_interval_ms: 50, timeout_ms: 500, redis: shared } }],
        serviceUrl: 'http://127.0.0.1:9',
      });
      return { server, driver, router, status };
    }),
  );
  nodes.push(...started);
  return started;
}

const body = (model: string, maxTokens: number) =>
  Buffer.from(JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: maxTokens }));

function chat(node: Node, model: string, maxTokens = 1) {
  return node.router.handle({
    path: '/v1/chat/completions',
    headers: { 'content-type': 'application/json' },
    body: body(model, maxTokens),
  });
}

interface NodeStatus {
  store: string;
  inFlight: number;
  replicas: { url: string; adapters: { name: string; state: string; inFlight: number }[] }[];
  events: { op: string; detail?: string }[];
}

async function status(node: Node): Promise<NodeStatus> {
  const r = await node.status.handle({ method: 'GET', path: '/lora/status' });
  return JSON.parse(r.body.toString()) as NodeStatus;
}

/** `lora_router_shared_state_up` from the node's Prometheus route. */
async function sharedStateUp(node: Node): Promise<number> {
  const r = await node.status.handle({ method: 'GET', path: '/lora/metrics' });
  return Number(/^lora_router_shared_state_up (\S+)$/m.exec(r.body.toString())![1]);
}

function loads(name?: string) {
  return fleet!.replicas.flatMap((r) =>
    r.adapterLog().filter((e) => e.op === 'load' && (name === undefined || e.name === name)),
  );
}

/** Each replica's registry as the simulator reports it (/_sim/state): runtime-loaded adapters now, and the peak over the run. */
async function simRegistries(): Promise<{ now: number; peak: number }[]> {
  return Promise.all(
    fleet!.urls.map(async (url) => {
      const s = (await (await fetch(`${url}/_sim/state`)).json()) as {
        registry: { static: boolean }[];
        peakRuntimeAdapters: number;
      };
      return { now: s.registry.filter((e) => !e.static).length, peak: s.peakRuntimeAdapters };
    }),
  );
}

function unloads() {
  return fleet!.replicas.flatMap((r) => r.adapterLog().filter((e) => e.op === 'unload' && e.status === 200));
}

function unloadsUnderRequests() {
  return fleet!.replicas.flatMap((r) =>
    r.adapterLog().filter((e) => e.op === 'unload' && (e.inFlight ?? 0) > 0),
  );
}

describe('three Kong nodes sharing one Redis', () => {
  it('300 concurrent first requests for one cold adapter, spread over three nodes, cause exactly one load', async () => {
    fleet = await SimFleet.start([vllm(), vllm(), vllm()]);
    // A Redis timeout a starved machine cannot trip: nodes deciding alone (the degraded mode,
    // tested below) would each load.
    const ns = await startNodes(3, fleet.urls, {}, { timeout: 2000 });
    const rs = await Promise.all(Array.from({ length: 300 }, (_, i) => chat(ns[i % 3]!, 'cold')));
    expect(rs.map((r) => r.status)).toEqual(Array(300).fill(200));
    expect(loads('cold')).toHaveLength(1);
    const replicas = new Set(
      rs.map((r) => (r.kong.ctxShared.get('lora_router') as { replica: string }).replica),
    );
    expect(replicas.size).toBe(1);
    for (const n of ns) expect((await status(n)).store).toBe('redis');
    expect((await status(ns[0]!)).inFlight).toBe(0);
  });

  it("never unloads an adapter in flight on another node: one node's LRU skips it, or waits and answers 503", async () => {
    // One replica with room for two adapters; 'a' is the least recently used.
    fleet = await SimFleet.start([vllm({ engine: { loadBaseMs: 200 } })]);
    const [n0, n1] = await startNodes(3, fleet.urls, { max_loaded_adapters: 2, queue_timeout_ms: 600 });
    expect((await chat(n0!, 'a')).status).toBe(200);
    expect((await chat(n0!, 'b')).status).toBe(200);
    // A long request for 'a' on node 0 (about 2 s of decoding at the simulator's pace).
    const longA = chat(n0!, 'a', 2000);
    await waitFor(async () => (await status(n1!)).inFlight === 1, 5000, "node 1 seeing node 0's lease");
    // Node 1 needs room for 'c': its LRU would pick 'a', which is busy on node 0, so 'b' goes.
    expect((await chat(n1!, 'c')).status).toBe(200);
    const unloaded = fleet.replicas[0]!.adapterLog().filter((e) => e.op === 'unload');
    expect(unloaded.map((e) => e.name)).toEqual(['b']);
    // Now 'a' (busy on node 0) and 'c' (busy on node 1) fill the replica: 'd' must wait, then 503.
    const longC = chat(n1!, 'c', 2000);
    await waitFor(async () => (await status(n0!)).inFlight === 2, 5000, 'both leases visible');
    const d = await chat(n0!, 'd');
    expect(d.status).toBe(503);
    expect(JSON.parse(d.body.toString()).error.code).toBe('adapter_slots_busy');
    expect((await longA).status).toBe(200);
    expect((await longC).status).toBe(200);
    expect(unloadsUnderRequests()).toEqual([]);
  });

  it('keeps the leases of a node killed mid-request while its request runs, then reclaims them by age, so the others may unload its adapter', async () => {
    fleet = await SimFleet.start([vllm({ engine: { loadBaseMs: 200 } })]);
    const [n0, n1] = await startNodes(
      3,
      fleet.urls,
      { max_loaded_adapters: 1, queue_timeout_ms: 20_000, lease_max_age_ms: 3000 },
      { node_ttl_ms: 1000 },
    );
    // Node 1 starts a request for 'a' (400 tokens, about 8 s), then its plugin server dies before
    // the log phase: nginx still proxies the request, the replica still runs it (issue 24, item 3).
    void chat(n1!, 'a', 400).catch(() => null);
    await waitFor(() => fleet!.replicas[0]!.engine.stats().running === 1, 5000, "node 1's request decoding");
    expect((await status(n0!)).inFlight).toBe(1);
    await n1!.server.kill();
    // Node 0 needs the only slot for 'b': it waits while the request runs on the replica (the
    // polls renew its lease, node 1 silent or not), then for lease_max_age_ms, then loads.
    const b = await chat(n0!, 'b');
    expect(b.status).toBe(200);
    expect(unloadsUnderRequests()).toEqual([]);
    const s = await status(n0!);
    expect(s.events.some((e) => e.op === 'lease-expired' && /held over/.test(e.detail ?? ''))).toBe(true);
    expect(loads('b')).toHaveLength(1);
    expect(s.inFlight).toBe(0);
  });

  it('under mixed load with evictions on every node, loses no in-flight count and unloads nothing in flight', async () => {
    // 2 replicas x 2 slots, 8 adapters: most requests need a load, so every node evicts.
    fleet = await SimFleet.start([vllm(), vllm()]);
    // A generous Redis timeout: this test is about shared decisions. On a starved machine a 200 ms
    // timeout sends nodes to local decisions, where they may together overfill a replica (the
    // documented degraded mode, tested below with Redis stopped).
    const ns = await startNodes(
      3,
      fleet.urls,
      { max_loaded_adapters: 2, queue_timeout_ms: 2000 },
      { timeout: 2000 },
    );
    const names = Array.from({ length: 8 }, (_, i) => `mix-${i}`);
    let next = 0;
    const statuses: number[] = [];
    // 600 requests, 24 at a time, dealt over the nodes.
    await Promise.all(
      Array.from({ length: 24 }, async () => {
        for (let i = next++; i < 600; i = next++) {
          const r = await chat(ns[i % 3]!, names[(i * 7) % names.length]!, 1 + (i % 5));
          statuses.push(r.status);
        }
      }),
    );
    expect(statuses).toHaveLength(600);
    // Served, or refused with 503 when every slot was busy for queue_timeout_ms; nothing else.
    expect(statuses.filter((x) => x !== 200 && x !== 503)).toEqual([]);
    expect(statuses.filter((x) => x === 200).length).toBeGreaterThan(300);
    expect(
      fleet.replicas.flatMap((r) => r.adapterLog().filter((e) => e.op === 'unload')).length,
    ).toBeGreaterThan(0);
    expect(unloadsUnderRequests()).toEqual([]);
    for (const n of ns) expect((await status(n)).inFlight).toBe(0);
    for (const n of ns) expect((await status(n)).store).toBe('redis');
    // No replica ever held more than its 2 slots: the simulator's registry, at its peak over the run.
    expect((await simRegistries()).map((r) => r.peak)).toEqual([2, 2]);
  });

  it('keeps serving on local decisions while Redis is down, evicting nothing though eviction is needed, and shares decisions again when it returns', async () => {
    // 2 replicas x 2 slots and 6 adapters: serving them all needs evictions.
    fleet = await SimFleet.start([vllm(), vllm()]);
    // A Redis timeout generous enough that no node drops to local decisions before the outage on
    // a starved machine (a stopped Redis refuses at once, so the outage is still seen at once).
    const ns = await startNodes(
      3,
      fleet.urls,
      { max_loaded_adapters: 2, queue_timeout_ms: 300 },
      { timeout: 1000 },
    );
    const names = ['x', 'y', 'z', 'u', 'v', 'w'];
    const round = async (models: string[]) => {
      const rs = await Promise.all(
        Array.from({ length: 30 }, (_, i) => chat(ns[i % 3]!, models[i % models.length]!)),
      );
      return rs.map((r, i) => ({
        model: models[i % models.length]!,
        status: r.status,
        code: r.status === 200 ? undefined : JSON.parse(r.body.toString()).error.code,
      }));
    };
    expect((await round(['x', 'y'])).map((r) => r.status)).toEqual(Array(30).fill(200));
    const logged = ns.map((n) => n.server.log.length);
    const outageAt = Math.max(0, ...fleet.replicas.flatMap((r) => r.adapterLog().map((e) => e.at)));
    await redis.stop();
    const down: { model: string; status: number; code?: string }[] = [];
    for (let i = 0; i < 3; i++) down.push(...(await round(names)));
    for (const n of ns) expect((await status(n)).store).toBe('local');
    expect(await sharedStateUp(ns[0]!)).toBe(0);
    // Every request answered: served, or refused for want of a free slot, which only an unload
    // (not allowed while the nodes cannot see each other's requests) would have made.
    expect(down.filter((r) => r.status !== 200 && r.code !== 'adapter_slots_busy')).toEqual([]);
    // No eviction: the only unloads while deciding alone undo a load of this outage that took a
    // replica over its limit (nodes alone may each load into its last slot), before any request
    // used it; nothing resident before the outage goes.
    const residentBefore = new Set(
      fleet.replicas.flatMap((r, i) =>
        r
          .adapterLog()
          .filter((e) => e.op === 'load' && e.status === 200 && e.at <= outageAt)
          .map((e) => `${i}/${e.name}`),
      ),
    );
    const outageUnloads = fleet.replicas.flatMap((r, i) =>
      r
        .adapterLog()
        .filter((e) => e.op === 'unload' && e.status === 200 && e.at > outageAt)
        .map((e) => ({ key: `${i}/${e.name}`, inFlight: e.inFlight ?? 0 })),
    );
    expect(outageUnloads.filter((u) => residentBefore.has(u.key) || u.inFlight > 0)).toEqual([]);
    // More adapters were asked for than the fleet's 4 slots: deciding together the nodes would
    // have evicted; alone they served from free slots (their own view) or refused, unloading nothing.
    expect(new Set(down.map((r) => r.model)).size).toBeGreaterThan(2 * 2);
    // Each node fills only the slots it sees free, but cannot see the others' loads until a
    // poll: together they may overfill a replica, never beyond every node filling it alone.
    expect((await simRegistries()).every((r) => r.peak <= 2 * ns.length)).toBe(true);
    ns.forEach((n, i) => {
      const said = n.server.log.slice(logged[i]).filter((l) => /shared fleet state unavailable/.test(l));
      expect(said).toHaveLength(1); // logged once for this outage, not per request
    });
    await redis.start();
    for (const n of ns) await waitFor(async () => (await status(n)).store === 'redis', 10_000, 'recovery');
    expect(await sharedStateUp(ns[0]!)).toBe(1);
    // A node back on Redis unloads nothing for two probe intervals (2 s), while the others may
    // still decide alone (failover-store.ts UNLOAD_HOLD_OFF_PROBES): wait that out.
    await new Promise((r) => setTimeout(r, 2500));
    // Shared again: eviction resumes (new adapters, so that it must).
    const recovered = unloads().length;
    const after: { model: string; status: number; code?: string }[] = [];
    for (let i = 0; i < 3; i++) after.push(...(await round(['p', 'q', 'r', 's', 't', 'o'])));
    expect(after.filter((r) => r.status !== 200 && r.code !== 'adapter_slots_busy')).toEqual([]);
    expect(unloads().length).toBeGreaterThan(recovered);
    for (const n of ns) expect((await status(n)).inFlight).toBe(0);
    expect(ns.every((n) => n.server.log.some((l) => /shared fleet state is back/.test(l)))).toBe(true);
    expect(unloadsUnderRequests()).toEqual([]);
  });
});
