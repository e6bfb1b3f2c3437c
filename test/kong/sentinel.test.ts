/**
 * Redis with Sentinel, configured as Kong Enterprise's plugins take it (`sentinel_master`,
 * `sentinel_role`, `sentinel_nodes`): two Kong nodes (one real plugin server each) share fleet
 * state through a real primary, a replica and three real sentinels; the primary is shut down
 * while requests flow to simulated vLLM replicas that must evict. The sentinels promote the
 * replica, the nodes follow it, and nothing is lost: every request answered (served, or 503
 * for want of a free slot while the nodes decided alone), every in-flight count back to 0 in
 * the new primary and on each node, no adapter unloaded under a request (the simulator's own log).
 */
import { randomBytes } from 'node:crypto';
import { LocalGateway } from '../../stack/gateway';
import { SimFleet } from '../../sim/fleet';
import { redisCall, SentinelSet } from '../../harness/redis/sentinel';
import { waitFor } from '../../harness/wait';
import { KongDriver, PluginServerProcess } from '../../harness/kong/driver';
import { BASE, PLUGINS_DIR, json, vllm } from './world';

interface Node {
  server: PluginServerProcess;
  driver: KongDriver;
  router: LocalGateway;
  status: LocalGateway;
}

let set: SentinelSet | undefined;
let fleet: SimFleet | undefined;
const nodes: Node[] = [];

afterEach(async () => {
  for (const n of nodes.splice(0)) {
    await n.router.close();
    await n.status.close();
    n.driver.close();
    await n.server.stop();
  }
  await fleet?.stop();
  fleet = undefined;
  await set?.close();
  set = undefined;
});

async function startNode(
  routerConfig: Record<string, unknown>,
  redis: Record<string, unknown>,
): Promise<Node> {
  const server = await PluginServerProcess.start({ pluginsDir: PLUGINS_DIR });
  const driver = new KongDriver(server.socketPath);
  const router = await LocalGateway.create({
    driver,
    plugins: [{ name: 'lora-router', config: routerConfig }],
    serviceUrl: fleet!.urls[0]!,
  });
  const status = await LocalGateway.create({
    driver,
    plugins: [{ name: 'lora-poller', config: { poll_interval_ms: 100, timeout_ms: 500, redis } }],
    serviceUrl: 'http://127.0.0.1:9',
  });
  const node = { server, driver, router, status };
  nodes.push(node);
  return node;
}

const chat = (n: Node, model: string, maxTokens: number) =>
  n.router.handle({
    path: '/v1/chat/completions',
    headers: { 'content-type': 'application/json' },
    body: Buffer.from(
      JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: maxTokens }),
    ),
  });

interface Status {
  store: string;
  inFlight: number;
  replicas: { adapters: { name: string; inFlight: number }[] }[];
}
const status = async (n: Node): Promise<Status> =>
  json((await n.status.handle({ method: 'GET', path: '/lora/status' })).body) as Status;

it('fails over a real primary under traffic: every request answered, no lease lost, nothing unloaded under a request', async () => {
  // The sentinel set, the replicas and (below) the two plugin servers start side by side; each is
  // kept as soon as it is up, for afterEach to stop.
  await Promise.all([
    SentinelSet.start().then((x) => (set = x)),
    SimFleet.start([vllm(), vllm()]).then((x) => (fleet = x)),
  ]);
  if (!set || !fleet) throw new Error('not started');
  const prefix = `snt${randomBytes(4).toString('hex')}:`;
  // A generous timeout: a starved machine must not send the nodes to local decisions before the failover.
  const redis = set.config(prefix, { timeout: 1000 });
  const routerConfig = {
    replicas: fleet.urls.map((url) => ({ url })),
    base_model: BASE,
    adapter_path_template: '/adapters/{name}',
    max_loaded_adapters: 2,
    queue_timeout_ms: 500,
    redis,
  };
  const ns = await Promise.all([startNode(routerConfig, redis), startNode(routerConfig, redis)]);
  for (const n of ns) await waitFor(async () => (await status(n)).store === 'redis', 10_000, 'sharing state');
  const oldPrimary = set.primary.port;
  expect(await set.primaryPort()).toBe(oldPrimary);

  // 2 replicas x 2 slots, 6 adapters: serving them all needs evictions, on every node.
  const names = Array.from({ length: 6 }, (_, i) => `ha-${i}`);
  type Phase = 'before' | 'outage' | 'after';
  /** Each answer, with the phases its request began and ended in. */
  const answered: { status: number; code?: string | number; phase: Phase; ended: Phase }[] = [];
  let phase: Phase = 'before';
  let sharedAgainAt = -1;
  let next = 0;
  const MIN = 300;
  const MAX = 3000;
  const deadline = Date.now() + 90_000;
  // Traffic until well after the failover: at least MIN requests, and 100 more once both nodes
  // share state in the new primary. Bounded in count and time.
  const done = () =>
    next >= MAX ||
    Date.now() > deadline ||
    (next >= MIN && sharedAgainAt >= 0 && answered.length >= sharedAgainAt + 100);
  const traffic = Promise.all(
    Array.from({ length: 12 }, async () => {
      while (!done()) {
        const i = next++;
        const began = phase; // the phase a request began in
        const r = await chat(ns[i % 2]!, names[(i * 5) % names.length]!, 1 + (i % 4));
        answered.push({
          status: r.status,
          code: r.status === 200 ? undefined : (json(r.body) as { error?: { code?: string } }).error?.code,
          phase: began,
          ended: phase,
        });
      }
    }),
  );
  // The failover, mid-traffic: SHUTDOWN the primary (Redis 7 lets the replica catch up first).
  await waitFor(() => answered.length >= 100, 60_000, '100 requests before the failover');
  // The fleet began more than node_ttl_ms ago (its state's epoch is set by the first request's
  // registration): the node count each decision reads from here is whole. A node that read none
  // whole grants no cold load alone (cold requests 429 until Redis answers again).
  await redisCall(oldPrimary, 'SET', `${prefix}epoch-at`, '0');
  await waitFor(() => answered.length >= 140, 60_000, 'both nodes deciding on a whole node count');
  phase = 'outage';
  await redisCall(oldPrimary, 'SHUTDOWN', 'NOSAVE').catch(() => undefined);
  await waitFor(
    async () => (await set!.primaryPort().catch(() => oldPrimary)) !== oldPrimary,
    30_000,
    'the sentinels promoting the replica',
  );
  for (const n of ns)
    await waitFor(
      async () => (await status(n)).store === 'redis',
      30_000,
      'the node sharing state in the new primary',
    );
  sharedAgainAt = answered.length;
  phase = 'after';
  await traffic;

  expect(await set.primaryPort()).toBe(set.replica.port);
  expect(answered.length).toBeGreaterThanOrEqual(MIN);
  // Every request answered: served, or refused for want of a free slot (nodes deciding alone
  // load only into free slots); never an error. One exception for requests decided during the
  // outage (begun before it ended, ended after it began), while the nodes decide alone: a
  // node's own view of residency is as fresh as its last poll, so an adapter another node
  // unloaded just before may still be routed to, and the replica's 404 comes back (docs/routing.md, section 7).
  const overlapsOutage = (a: (typeof answered)[number]) => a.phase !== 'after' && a.ended !== 'before';
  const stale = (a: (typeof answered)[number]) => overlapsOutage(a) && a.status === 404 && a.code === 404;
  expect(answered.filter((a) => a.status !== 200 && a.code !== 'adapter_slots_busy' && !stale(a))).toEqual(
    [],
  );
  expect(answered.filter(stale).length).toBeLessThan(10);
  // Shared again, evictions resume: requests served after the failover.
  expect(answered.filter((a) => a.phase === 'after' && a.status === 200).length).toBeGreaterThan(50);
  // No lease lost: every in-flight count back to 0, in the new primary and on each node.
  const openLeases = async () =>
    redisCall(set!.replica.port, 'HGETALL', `${prefix}lease`) as Promise<string[]>;
  await waitFor(
    async () => (await openLeases()).length === 0,
    5000,
    'no lease left in the new primary',
  ).catch(async (err: Error) => {
    // Which leases, and what the nodes said about the shared state: enough to find the path.
    const said = ns.map((n, i) =>
      n.server.log
        .filter((l) => /shared|lease|epoch|Redis|unload/i.test(l))
        .slice(-40)
        .map((l) => `node ${i}: ${l}`)
        .join('\n'),
    );
    throw new Error(`${err.message}: ${JSON.stringify(await openLeases())}\n${said.join('\n')}`);
  });
  for (const n of ns) {
    const s = await status(n);
    expect(s.store).toBe('redis');
    expect(s.inFlight).toBe(0);
    expect(s.replicas.flatMap((r) => r.adapters.filter((a) => a.inFlight !== 0))).toEqual([]);
  }
  // No busy unload: the simulator's own log of unloads, with the requests it was running then.
  const unloads = fleet.replicas.flatMap((r) => r.adapterLog().filter((e) => e.op === 'unload'));
  expect(unloads.length).toBeGreaterThan(0);
  expect(unloads.filter((e) => (e.inFlight ?? 0) > 0)).toEqual([]);
  // The nodes said what happened.
  for (const n of ns) expect(n.server.log.some((l) => /shared fleet state is back/.test(l))).toBe(true);
}, 180_000);
