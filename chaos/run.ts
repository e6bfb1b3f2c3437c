/**
 * The randomized fault run (docs/reliability/fault-run.md): traffic through three
 * Kong nodes while a seeded nemesis partitions a node from Redis, flushes Redis, restarts it with
 * and without persistence, changes the nodes' `redis` record and skews a node's clock; then the
 * faults are healed, traffic stops, the nodes settle, and the invariants are checked from the
 * replicas' own logs and from Redis and each node.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import {
  coldLoadsWithinBudget,
  leasesReleased,
  loadedWithinLimit,
  noBusyUnload,
  type InvariantResult,
  type LeaseObservation,
  type ReplicaLogEntry,
} from './invariants';
import { describeFault, faultDuration, makeSchedule, type Fault, type ScheduledFault } from './schedule';
import { Traffic, type TrafficStats } from './traffic';
import { procUsage, SAMPLE_HEADER, sampleLine, type NodeSample } from './recorder';
import { ChaosWorld, PREFIX, type ChaosNode, type NodeDeath, type WorldOptions } from './world';
import { UNLOAD_HOLD_OFF_PROBES } from '../src/fleet/redis/outage';

export interface ChaosOptions {
  seed: number;
  /** How long traffic runs; faults stop a few seconds before it does. */
  trafficMs: number;
  /** Prints progress lines (the CLI); silent in tests. */
  log?: (line: string) => void;
  /**
   * A directory (created) for each node's whole output (`node-N.log`), its resource samples
   * (`samples.csv`) and the report (`report.json`).
   */
  logDir?: string;
}

/** How often each plugin server's memory, CPU, Redis connections and status latency are sampled. */
export const SAMPLE_MS = 10_000;

export interface AppliedFault extends ScheduledFault {
  /** Wall-clock Unix ms when it was applied and healed. */
  appliedAt: number;
  healedAt: number;
  text: string;
}

export interface ChaosReport {
  seed: number;
  trafficMs: number;
  /** Wall-clock Unix ms when traffic started (the report's times count from it). */
  startedAt: number;
  world: WorldOptions & { adapters: number; clients: number };
  schedule: AppliedFault[];
  invariants: InvariantResult[];
  /** Not an invariant: (iv) again, allowing one more budget per fault that emptied the store. */
  budgetWithResets: InvariantResult;
  traffic: TrafficStats;
  /** What (i)'s witness saw: proxied requests, /metrics asks and unload calls by node, and calls from no node. */
  witness: ReturnType<ChaosWorld['senders']['counts']>;
  /** Every node back on Redis after the heal (else the lease counts are the local ones). */
  settled: boolean;
  /** Every replica's adapter log (loads and unloads), to read a violation against. */
  replicaLog: ReplicaLogEntry[];
  /** Each node's last operational log lines (`+s line`), for reading violations against. */
  notices: string[][];
  /** Per node, how many earlier operational lines were dropped to keep the last ones. */
  noticesDropped: number[];
  /** Each plugin server's resources every SAMPLE_MS (growth over a long run shows a leak). */
  samples: NodeSample[];
  /** Nodes whose status route failed at the end, and how. */
  statusProblems: string[];
  /** Plugin servers that exited during the run (a failure of the run, whatever the invariants say). */
  deaths: (NodeDeath & { node: number })[];
  /** Stray rejections a plugin server logged and survived, per node (a failure of the run too). */
  strays: string[][];
  ok: boolean;
}

export const WORLD: WorldOptions = {
  nodes: 3,
  replicas: 3,
  maxLoadedAdapters: 2,
  coldLoadsPerMinute: 20,
  pollIntervalMs: 250,
  skewMs: 200,
  timeoutMs: 1000,
  nodeTtlMs: 3000,
};
const ADAPTERS = 10;
const CLIENTS_PER_NODE = 3;
const WINDOW_MS = 60_000;
/**
 * How long (ii) still excuses an excess once every node shares decisions and no fault is under way:
 * a node back from an outage unloads nothing for two probe intervals (src/fleet/redis/outage.ts,
 * the failover store's default probe of 1 s), then polls find the excess and trim it once idle.
 */
const AFTER_OUTAGE_MS = UNLOAD_HOLD_OFF_PROBES * 1000 + 4 * WORLD.pollIntervalMs;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function runChaos(o: ChaosOptions): Promise<ChaosReport> {
  const say = o.log ?? (() => {});
  const world = await ChaosWorld.start(WORLD, o.logDir);
  let report: ChaosReport | undefined;
  try {
    report = await run(world, o, say);
    return report;
  } finally {
    await world.stop();
    if (o.logDir && report) {
      writeFileSync(join(o.logDir, 'report.json'), JSON.stringify(report, null, 1));
      writeFileSync(
        join(o.logDir, 'samples.csv'),
        [SAMPLE_HEADER, ...report.samples.map(sampleLine)].join('\n') + '\n',
      );
    }
  }
}

async function run(world: ChaosWorld, o: ChaosOptions, say: (l: string) => void): Promise<ChaosReport> {
  // Each node's poller starts with its lora-poller instance: one status request each.
  for (const n of world.nodes) await world.nodeStatus(n);
  await sleep(WORLD.pollIntervalMs * 3);
  const schedule = makeSchedule({
    seed: o.seed,
    startMs: 2000,
    endMs: Math.max(2500, o.trafficMs - 8000),
    nodes: WORLD.nodes,
    skewMs: WORLD.skewMs,
    maxPartitionMs: 2 * WORLD.nodeTtlMs,
  });
  const traffic = new Traffic(world.nodes, {
    seed: o.seed,
    clientsPerNode: CLIENTS_PER_NODE,
    adapters: ADAPTERS,
    mistypedEvery: 30,
  });
  const started = Date.now();
  say(`traffic on ${WORLD.nodes} nodes for ${Math.round(o.trafficMs / 1000)} s, ${schedule.length} faults`);
  traffic.start();
  // The nodes' status routes, read now and then as an operator would (it also starts a new
  // lora-poller instance after a configuration change, as Kong does on the next request).
  let watching = true;
  const watcher = (async () => {
    while (watching) {
      for (const n of world.nodes) await world.nodeStatus(n);
      await sleep(1000);
    }
  })();
  const samples: NodeSample[] = [];
  const sample = () => {
    for (const n of world.nodes)
      samples.push({
        t: (Date.now() - started) / 1000,
        node: n.index,
        ...procUsage(n.server.child.pid),
        redisConnections: n.proxy.connections,
        statusMs: n.statusMs,
      });
  };
  sample();
  const sampler = setInterval(sample, SAMPLE_MS);
  const applied: AppliedFault[] = [];
  for (const s of schedule) {
    const wait = started + s.at - Date.now();
    if (wait > 0) await sleep(wait);
    if (Date.now() - started > o.trafficMs) break;
    const appliedAt = Date.now();
    const text = describeFault(s.fault);
    say(`+${((appliedAt - started) / 1000).toFixed(1)} s  ${text}`);
    await apply(world, s.fault);
    await sleep(faultDuration(s.fault));
    await heal(world, s.fault);
    applied.push({ ...s, appliedAt, healedAt: Date.now(), text });
  }
  const left = started + o.trafficMs - Date.now();
  if (left > 0) await sleep(left);
  await traffic.stop();
  watching = false;
  await watcher;
  clearInterval(sampler);
  sample();
  say(`traffic stopped: ${traffic.stats.sent} requests, by status ${JSON.stringify(traffic.stats.byStatus)}`);
  const endMs = Date.now();
  // Settle: every node back on Redis, then long enough for a silent node's leases to expire
  // and a few polls to run.
  say('settling: waiting for every node to share decisions in Redis again');
  const settled = await waitAll(world, (s) => s?.store === 'redis', 20_000);
  await sleep(WORLD.nodeTtlMs + 4 * WORLD.pollIntervalMs);
  say(`settled: ${settled}; reading open leases in Redis and on each node`);
  const leases = await leaseCounts(world, say);
  const log: ReplicaLogEntry[] = world.fleet.replicas.flatMap((r) =>
    r.adapterLog().map((e) => ({ ...e, replica: r.url })),
  );
  const invariants = [
    noBusyUnload(log, world.senders),
    loadedWithinLimit(log, WORLD.maxLoadedAdapters, WORLD.pollIntervalMs, endMs, {
      spans: [
        ...world.nodes.flatMap((n) => n.alone.until(endMs)),
        ...applied.map((f) => ({ from: f.appliedAt, to: f.healedAt })),
      ],
      afterMs: AFTER_OUTAGE_MS,
    }),
    leasesReleased(leases),
    coldLoadsWithinBudget(log, WORLD.coldLoadsPerMinute, WINDOW_MS),
  ];
  const deaths = world.nodes.flatMap((n) => (n.death ? [{ node: n.index, ...n.death }] : []));
  for (const d of deaths)
    say(`node ${d.node}: its plugin server DIED (exit code ${d.code}, signal ${d.signal})`);
  const resets = applied
    .filter(
      (f) =>
        f.fault.kind === 'flushall' ||
        (f.fault.kind === 'redis-restart' && !f.fault.persist) ||
        (f.fault.kind === 'redis-record' && f.fault.change === 'state'),
    )
    .map((f) => f.appliedAt);
  return {
    seed: o.seed,
    trafficMs: o.trafficMs,
    startedAt: started,
    world: { ...WORLD, adapters: ADAPTERS, clients: CLIENTS_PER_NODE * WORLD.nodes },
    schedule: applied,
    invariants,
    budgetWithResets: coldLoadsWithinBudget(log, WORLD.coldLoadsPerMinute, WINDOW_MS, resets),
    traffic: traffic.stats,
    witness: world.senders.counts(),
    settled,
    replicaLog: log,
    notices: world.nodes.map((n) =>
      n.notices.toArray().map((l) => `+${((l.at - started) / 1000).toFixed(1)} s ${l.line}`),
    ),
    noticesDropped: world.nodes.map((n) => n.notices.dropped),
    samples,
    statusProblems: world.nodes
      .filter((n) => n.statusProblem)
      .map((n) => `node ${n.index}: ${n.statusProblem}`),
    deaths,
    strays: world.nodes.map((n) => n.strays),
    ok:
      settled &&
      deaths.length === 0 &&
      world.nodes.every((n) => n.strays.length === 0) &&
      invariants.every((i) => i.violations.length === 0),
  };
}

async function apply(world: ChaosWorld, f: Fault): Promise<void> {
  switch (f.kind) {
    case 'partition':
      world.nodes[f.node]!.proxy.cut(f.mode);
      return;
    case 'flushall':
      await world.redis.command(['FLUSHALL']);
      return;
    case 'redis-restart':
      await world.redis.restart(f.persist, f.downMs);
      return;
    case 'redis-record': {
      // Kong pushes the configuration to each node in turn: the nodes change within `staggerMs`.
      const k = f.staggerMs % world.nodes.length;
      const order = [...world.nodes.slice(k), ...world.nodes.slice(0, k)];
      for (const [i, n] of order.entries()) {
        const v =
          f.change === 'state'
            ? { ...n.variant, database: 1 - n.variant.database }
            : { ...n.variant, timeouts: !n.variant.timeouts };
        await world.reconfigure(n, v);
        if (i < order.length - 1) await sleep(f.staggerMs / (order.length - 1));
      }
      return;
    }
    case 'clock-skew':
      world.toggleSkew(world.nodes[f.node]!);
      return;
  }
}

async function heal(world: ChaosWorld, f: Fault): Promise<void> {
  if (f.kind === 'partition') world.nodes[f.node]!.proxy.restore();
  if (f.kind === 'clock-skew') {
    const n = world.nodes[f.node]!;
    if (n.skewed) world.toggleSkew(n);
  }
}

async function waitAll(
  world: ChaosWorld,
  ok: (s: { store: string; inFlight: number } | null) => boolean,
  ms: number,
): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const all = await Promise.all(world.nodes.map((n) => world.nodeStatus(n)));
    if (all.every(ok)) return true;
    await sleep(200);
  }
  return false;
}

/**
 * Open leases after the run: in Redis (each database a record pointed at: the lease table and
 * the per-adapter in-flight counts), and each node's own view, its shared view from its status
 * route and its local one read with its link cut for a moment (a degraded node answers from its
 * local store).
 */
async function leaseCounts(world: ChaosWorld, say: (l: string) => void): Promise<LeaseObservation[]> {
  const out: LeaseObservation[] = [];
  for (const db of [0, 1]) {
    const c = new Redis({ port: world.redis.port, host: '127.0.0.1', db, maxRetriesPerRequest: 1 });
    c.on('error', () => {});
    try {
      const table = await c.hgetall(`${PREFIX}lease`);
      out.push({
        where: `Redis db ${db} lease table`,
        open: Object.keys(table).length,
        sample: Object.values(table).slice(0, 3),
      });
      let busy = 0;
      for (const key of await c.keys(`${PREFIX}busy:*`))
        for (const v of await c.hvals(key)) busy += Math.max(0, Number(v));
      out.push({ where: `Redis db ${db} in-flight counts`, open: busy });
    } finally {
      c.disconnect();
    }
  }
  for (const n of world.nodes) {
    say(`node ${n.index}: status, then its local store`);
    const shared = await world.nodeStatus(n);
    out.push({
      where: `node ${n.index} status (${shared?.store ?? 'no answer'})`,
      open: shared?.inFlight ?? -1,
    });
    out.push({ where: `node ${n.index} local store`, open: await localInFlight(world, n) });
  }
  return out;
}

async function localInFlight(world: ChaosWorld, n: ChaosNode): Promise<number> {
  n.proxy.cut('refuse');
  try {
    for (let i = 0; i < 20; i++) {
      const s = await world.nodeStatus(n);
      if (s?.store === 'local') return s.inFlight;
      await sleep(100);
    }
    return -1;
  } finally {
    n.proxy.restore();
    const end = Date.now() + 10_000;
    while (Date.now() < end && (await world.nodeStatus(n))?.store !== 'redis') await sleep(200);
  }
}
