/**
 * The nodes' plugin-server processes: each starts with no memory of any before it, takes a
 * `redis` record change as a new runtime (the old one drains) and dies whole on a restart. Each
 * runtime runs the real src/ over the modelled Redis and the simulator's replicas, its calls
 * recorded (calls-seen.ts).
 */
import { HttpReplicaApi } from '../src/backends/http-replica-api';
import { parseRouterConfig } from '../src/config/parse';
import type { RedisConfig } from '../src/config/redis-schema';
import type { RouterConfig } from '../src/config/router-schema';
import type { FailoverFleetStore } from '../src/fleet/redis/failover-store';
import { silentLogger } from '../src/log';
import type { Random } from '../src/random';
import { RouterService } from '../src/router/router';
import { FleetRuntime } from '../src/runtime';
import { RuntimeRegistry } from '../src/runtime-registry';
import { routingRequest, type CallsSeen } from './calls-seen';
import type { HealthReads } from './health-reads';
import type { LinkFaults, RedisModel } from './redis-model';
import { prefetchFields } from './prefetch-draw';
import { LeftStates } from './left-check';
import { RegistrationPasses } from './registration-passes';
import type { ReplicaSet } from './replicas';
import type { Schedule } from './schedule';
import { NodeClock, type Scheduler } from './scheduler';
import {
  LOAD_TIMEOUT_MS,
  NODE_TTL_MS,
  POLL_MS,
  POLL_TIMEOUT_MS,
  QUEUE_TIMEOUT_MS,
  REDIS_TIMEOUT_MS,
} from './world-timings';

/** Kong's `__plugin_id` of the nodes' lora-router plugin, in worlds whose configurations change. */
export const PLUGIN_ID = '6f1c1a9e-lora-router';
/** Kong's `__plugin_id` of the nodes' lora-poller plugin, in worlds where it is a plugin of its own. */
export const POLLER_ID = '9b3e5d2a-lora-poller';

/**
 * A router configuration a node ran before its current one (superseded): what it lists, and when
 * a worker last routed a request through it, or its log phase started an instance of it (world
 * time). Kept for the checks (dst/forget-check.ts) while its process lives.
 */
export interface OldConfig {
  node: number;
  /** The process that ran it: a restarted process starts on the current configuration only. */
  gen: number;
  urls: readonly string[];
  seq: number;
  supersededAt: number;
  usedAt: number;
  /** Its service on the runtime current when it was superseded (a stale worker's requests go there). */
  svc: RouterService;
  /** The `redis` record it ran on: state `db`, the node's `recordGen`th record. */
  db: number;
  recordGen: number;
}

/** Parsed router configurations by their input (frozen: a runtime never changes its own). */
const configs = new Map<string, RouterConfig>();
const CONFIGS_KEPT = 256;

/** A runtime's `redis` record: state `db`, its `recordGen`th record on the node. */
export function redisConfig(w: Schedule['world'], db: number, recordGen: number): RedisConfig {
  return {
    host: 'redis',
    port: 6379,
    // Same state, another record: only the timeout differs.
    timeout: REDIS_TIMEOUT_MS + (recordGen % 2),
    database: db,
    ssl: false,
    ssl_verify: false,
    prefix: 'lora:',
    node_ttl_ms: w.nodeTtlMs ?? NODE_TTL_MS,
  };
}

/** The name a runtime's calls to the replicas go by: its lease prefix and its record's number. */
export function pollSender(prefix: string, recordGen: number): string {
  return `${prefix}r${recordGen}`;
}

/** A plugin-server process's name in the checks: `n<node>g<generation>`. */
export function procName(p: { node: number; gen: number }): string {
  return `n${p.node}g${p.gen}`;
}

/** One plugin-server process of a node: its runtime(s) and the router service Kong calls. */
export interface Process {
  node: number;
  gen: number;
  alive: boolean;
  clock: NodeClock;
  /** Its runtimes by `redis` record, as the plugins' process keeps them (src/runtime-registry.ts). */
  registry: RuntimeRegistry;
  /** The runtime its current router configuration runs on (the registry's for its record). */
  rt: FleetRuntime;
  svc: RouterService;
  /** Every runtime its registry made (a record change adds one): their stores' checks. */
  runtimes: FleetRuntime[];
  /** Every router service it made (one per runtime): their held requests' counts (`heldInGateway`). */
  services: RouterService[];

  /** Requests in its access phase now. */
  routing: number;
  /** Requests it took that have not ended (routing, proxied or logging). */
  open: number;
  startedAt: number;
  /** Which shared state its current runtime uses (0 or 1: two databases). */
  db: number;
  recordGen: number;
}

/** When a runtime's walks over its open leases were due, began and ended (`NodeProcesses.retakeWalks`). */
export interface RetakeWalks {
  /** A reclaim's registration ended: its walk begins at once. */
  dueAt?: number;
  begunAt?: number;
  endedAt?: number;
}

/** A node's links to Redis (its host, whatever process runs there) and the faults open on them. */
export interface NodeLinkFaults {
  link: LinkFaults;
  partitions: number;
  slow: number;
}

/** What the processes run on: the world's scheduler, shared states, replicas and records. */
export interface ProcessGround {
  sched: Scheduler;
  random: Random;
  redis: RedisModel[];
  replicas: ReplicaSet;
  schedule: Schedule;
  calls: CallsSeen;
  healthReads: HealthReads;
}

export class NodeProcesses {
  /** By node: the process running there now. */
  readonly procs: Process[] = [];
  /** By lease prefix (a runtime's, shared by its successors on the same state): the state it uses. */
  readonly prefixDb = new Map<string, number>();
  /** The lease prefixes (store node ids) of runtimes whose process died: their leases go by age only. */
  readonly dead = new Set<string>();
  /**
   * By lease prefix: its runtime's walks taking all its open leases again (`HeldLeases.restore`,
   * a reclaim's after an emptied state, or a recovery's), for the checks (`leaseLost`).
   */
  readonly retakeWalks = new Map<string, RetakeWalks>();
  /** When a node first used each database: a state no node used yet loses nothing when emptied. */
  readonly dbUsedFrom = [0, Infinity];
  /** By retired store (a record change to other state): when it began to leave, and for how long it may try. */
  /** Each runtime's registrations of its replicas, counted in passes (dst/registration-passes.ts). */
  readonly passes = new RegistrationPasses();
  readonly leaving = new WeakMap<FailoverFleetStore, { at: number; maxMs: number }>();
  /** Per node (its host, whatever process runs there): the faults of its links to Redis. */
  readonly linkFaults: NodeLinkFaults[];
  /** By node: the replicas its current router configuration lists (Kong's, whatever process runs). */
  readonly listed: string[][];
  /** By node: its current configuration's `__seq__`, and since when it is current (world time). */
  readonly current: { seq: number; since: number }[];
  /** Superseded configurations of live processes, oldest first (world with configuration changes). */
  readonly oldConfigs: OldConfig[] = [];
  /**
   * By node: Kong's configuration of its lora-poller plugin (worlds with `configChanges.poller`):
   * the router record it follows (its own differs in timeout if `poller.timeout`), and its `__seq__`.
   */
  readonly pollerRecord: { db: number; recordGen: number; seq: number }[];
  /** Since when no plugin of each live process's node is on each state (dst/left-check.ts). */
  readonly left = new LeftStates();
  private readonly w: Schedule['world'];
  /** By runtime: the name its calls to the replicas go by (`pollSender`). */
  private readonly senders = new WeakMap<FleetRuntime, string>();
  /** By process: the record number of the runtime its registry is making (its calls' sender name). */
  private readonly making = new WeakMap<Process, number>();

  constructor(private readonly g: ProcessGround) {
    this.w = g.schedule.world;
    this.linkFaults = Array.from({ length: this.w.nodes }, () => ({
      link: { partitioned: false, slowMs: 0 },
      partitions: 0,
      slow: 0,
    }));
    // With a move drawn, the replicas only the moved record lists are no configuration's before it.
    const away = new Set(this.w.configChanges?.move?.away ?? []);
    this.listed = Array.from({ length: this.w.nodes }, () => g.replicas.urls.filter((_, i) => !away.has(i)));
    this.pollerRecord = Array.from({ length: this.w.nodes }, () => ({ db: 0, recordGen: 0, seq: 1 }));
    this.current = Array.from({ length: this.w.nodes }, () => ({ seq: 1, since: 0 }));
  }

  /**
   * A router service of a configuration of node `p.node` listing `urls` on record (`db`,
   * `recordGen`), as plugins/lora-router.ts makes one (Kong starting a plugin instance): on the
   * runtime its process's registry gives for the record, its plugin id and `__seq__`
   * (`sharedRuntime`), then registered there. With configuration changes it carries Kong's
   * `__plugin_id` and `__seq__`; without, neither (as before them).
   */
  private service(
    p: Process,
    db: number,
    recordGen: number,
    urls: readonly string[],
    seq: number,
  ): RouterService {
    const config = this.routerConfig(this.redisConfig(db, recordGen), urls);
    this.making.set(p, recordGen);
    const keyed = this.w.configChanges !== undefined;
    const rt = keyed
      ? p.registry.sharedRuntime(config.redis, seq, PLUGIN_ID)
      : p.registry.sharedRuntime(config.redis);
    const svc = keyed ? new RouterService(config, rt, PLUGIN_ID, seq) : new RouterService(config, rt);
    p.services.push(svc);
    return svc;
  }

  /** A new router service of node `p.node`'s current configuration, on its current record: Kong's current instance. */
  private currentService(p: Process): RouterService {
    const svc = this.service(p, p.db, p.recordGen, this.listed[p.node]!, this.current[p.node]!.seq);
    p.rt = svc.runtime;
    p.svc = svc;
    return svc;
  }

  /**
   * Node `p.node`'s lora-poller plugin starts an instance on its record (worlds with
   * `configChanges.poller`), as plugins/lora-poller.ts does: the registry's runtime for the record
   * (a record on the router's state but another timeout replaces the router's runtime there, the
   * node kept), its polling settings registered, polling started.
   */
  private startPoller(p: Process): void {
    const poller = this.w.configChanges?.poller;
    if (!poller) return;
    const rec = this.pollerRecord[p.node]!;
    const recordGen = rec.recordGen + poller.timeout;
    this.making.set(p, recordGen);
    const rt = p.registry.sharedRuntime(this.redisConfig(rec.db, recordGen), rec.seq, POLLER_ID);
    rt.registerPolling(POLLER_ID, { intervalMs: POLL_MS, timeoutMs: POLL_TIMEOUT_MS, jitter: 0.1 });
    rt.poller.start();
    // The router's runtime replaced on its state: its configuration's requests go to the successor.
    p.rt = p.rt.current();
    this.notePlugins(p);
  }

  /** Notes the states `p`'s plugins are on now: its router's record's, its lora-poller's if a plugin of its own. */
  private notePlugins(p: Process): void {
    // Only in worlds with a lora-poller of its own or a move (the others run as before them).
    const cc = this.w.configChanges;
    if (!cc?.poller && !cc?.move) return;
    const on = new Set([p.db]);
    if (this.w.configChanges?.poller) on.add(this.pollerRecord[p.node]!.db);
    this.left.note(p, on, this.g.sched.now());
  }

  /**
   * Node `n`'s lora-poller follows its router's record (now `p.db`, `p.recordGen`) after the
   * world's lag (Kong's push of the other plugin's change), or never (no lag drawn).
   */
  private pollerFollows(p: Process): void {
    const lagMs = this.w.configChanges?.poller?.lagMs;
    if (lagMs === undefined) return;
    const to = { db: p.db, recordGen: p.recordGen };
    this.g.sched.after(lagMs, () => {
      this.pollerRecord[p.node] = { ...to, seq: this.pollerRecord[p.node]!.seq + 1 };
      const now = this.procs[p.node]!;
      if (now.alive) this.startPoller(now);
    });
  }

  /**
   * Kong moves node `n`'s router plugin (a higher `__seq__`) to a record on the other state that
   * lists `urls`, replicas no configuration on the state it leaves lists: nothing replaces its
   * runtime there (the registry's `claimReplicas` finds no replica in common), its configuration
   * there is superseded (`pluginMoved`), and once every plugin of the node left that record and
   * the grace passed, the runtime retires (`retireIfLeft`). Its lora-poller follows after the lag.
   */
  move(n: number, urls: readonly string[]): void {
    const p = this.procs[n]!;
    this.supersede(n, urls);
    p.db = 1 - p.db;
    p.recordGen++;
    if (p.alive) {
      this.currentService(p);
      this.notePlugins(p);
    }
    this.pollerFollows(p);
  }

  /**
   * Process `p`'s registry: its runtimes are the simulation's (`runtime`: the modelled Redis links,
   * the recorded replica calls, the watches), named by process and record.
   */
  private registry(p: Process): RuntimeRegistry {
    const proc = { node: p.node, gen: p.gen, clock: p.clock, alive: () => p.alive };
    return new RuntimeRegistry({
      log: silentLogger,
      create: (o) => {
        const db = o.redis?.database ?? 0;
        const recordGen = this.making.get(p) ?? p.recordGen;
        // A new node id on other state (the first runtime: the process's own name).
        let prefix = o.leasePrefix ?? (p.runtimes.length === 0 ? procName(p) : `${procName(p)}r${recordGen}`);
        // Never another runtime's of this process (a lora-poller's record may carry the number).
        while (!o.leasePrefix && p.runtimes.some((r) => r.leasePrefix === prefix)) prefix += 'p';
        this.dbUsedFrom[db] = Math.min(this.dbUsedFrom[db]!, this.g.sched.now());
        const rt = this.runtime(proc, db, recordGen, prefix, o.leaseSeq);
        p.runtimes.push(rt);
        this.watchLeave(rt.store as FailoverFleetStore);
        return rt;
      },
    });
  }

  /**
   * Node `n`'s router configuration superseded by one listing `urls` (a higher `__seq__`): the old
   * one kept for the checks while its process lives (on its record: state `db`, `recordGen`).
   */
  private supersede(n: number, urls: readonly string[]): void {
    const p = this.procs[n]!;
    const cur = this.current[n]!;
    const now = this.g.sched.now();
    if (p.alive)
      this.oldConfigs.push({
        node: n,
        gen: p.gen,
        urls: this.listed[n]!,
        seq: cur.seq,
        supersededAt: now,
        usedAt: now,
        svc: p.svc,
        db: p.db,
        recordGen: p.recordGen,
      });
    this.listed[n] = [...urls];
    this.current[n] = { seq: cur.seq + 1, since: now };
  }

  /**
   * Kong changes node `n`'s router configuration to list `urls`: a new instance of the plugin (a
   * higher `__seq__`) registers on the node's current runtime and takes the new requests; the
   * previous one is superseded (requests under way stay on it, a stale worker may still route
   * through it for a while: request-routing.ts).
   */
  changeConfig(n: number, urls: readonly string[]): void {
    const p = this.procs[n]!;
    this.supersede(n, urls);
    if (!p.alive) return;
    this.currentService(p);
  }

  /**
   * The log phase of a request routed on superseded configuration `old` (Kong's `get_instance_id`
   * with its `__seq__`: plugin.lua 3.9.3): an instance of it starts and registers again (an older
   * `__seq__`: only used, node-claim.ts), and the worker's current instance is closed, so its next
   * request starts the current configuration's again (registered again: the same claim).
   */
  oldInstance(p: Process, old: OldConfig): RouterService {
    old.usedAt = this.g.sched.now();
    // On its own record (one the node may have left since): where the registry runs it.
    const svc = this.service(p, old.db, old.recordGen, old.urls, old.seq);
    this.currentService(p);
    return svc;
  }

  /**
   * The senders of runtimes a node's lora-poller plugin alone keeps (worlds with `configChanges.poller`):
   * on the state of its record, its router's on the other one, and no live node's router on it. With
   * a router there, that state forgets what no configuration lists (its retains), and the runtime
   * polls what the state lists: a call or a record of a replica forgotten there is judged as any.
   */
  pollerAloneSenders(): Set<string> {
    const out = new Set<string>();
    if (!this.w.configChanges?.poller) return out;
    const routed = new Set(this.procs.filter((p) => p.alive).map((p) => p.db));
    for (const p of this.procs) {
      const db = this.pollerRecord[p.node]!.db;
      if (!p.alive || db === p.db || routed.has(db)) continue;
      for (const rt of p.runtimes) if (this.prefixDb.get(rt.leasePrefix) === db) out.add(this.senderOf(rt));
    }
    return out;
  }

  /** The name `rt`'s calls to the replicas go by (calls-seen.ts: its prefix and record's number). */
  senderOf(rt: FleetRuntime): string {
    return this.senders.get(rt)!;
  }

  /** The superseded configuration `svc` runs, if it is one of a live process's. */
  oldConfigOf(p: Process, svc: RouterService): OldConfig | undefined {
    return this.oldConfigs.find((c) => c.node === p.node && c.gen === p.gen && c.svc === svc);
  }

  private redisConfig(db: number, recordGen: number): RedisConfig {
    return redisConfig(this.w, db, recordGen);
  }

  /** The router configuration's timeouts every node runs (they do not change with the `redis` record). */
  accessConfig(): RouterConfig {
    return this.routerConfig(this.redisConfig(0, 0), this.g.replicas.urls);
  }

  private routerConfig(redis: RedisConfig, urls: readonly string[]): RouterConfig {
    const raw = {
      replicas: urls.map((url) => ({ url })),
      base_model: 'meta-llama/Llama-3.1-8B-Instruct',
      adapter_path_template: '/adapters/{name}',
      adapter_name_pattern: '^[a-z,]+$',
      max_loaded_adapters: this.w.maxLoadedAdapters,
      cold_loads_per_minute: this.w.coldLoadsPerMinute,
      lease_max_age_ms: this.w.leaseMaxAgeMs,
      ttft_slo_ms: this.w.ttftSloMs,
      queue_timeout_ms: this.w.queueTimeoutMs ?? QUEUE_TIMEOUT_MS,
      load_timeout_ms: LOAD_TIMEOUT_MS,
      ...(this.w.sloClasses ? { slo_classes: this.w.sloClasses } : {}),
      ...prefetchFields(this.w),
      redis,
    };
    // Parsed once per distinct configuration, not per runtime: schedules share a handful of them.
    const key = JSON.stringify(raw);
    let parsed = configs.get(key);
    if (!parsed) {
      if (configs.size >= CONFIGS_KEPT) configs.clear();
      configs.set(key, (parsed = deepFreeze(parseRouterConfig(raw))));
    }
    return parsed;
  }

  private runtime(
    proc: { node: number; gen: number; clock: NodeClock; alive: () => boolean },
    db: number,
    recordGen: number,
    prefix: string,
    seq?: { next: number },
  ): FleetRuntime {
    const redis = this.redisConfig(db, recordGen);
    this.prefixDb.set(prefix, db);
    const sender = pollSender(prefix, recordGen);
    const api = new HttpReplicaApi(
      this.g.calls.record(
        this.g.replicas.http(proc.clock, this.g.random, proc.alive, sender, proc.node),
        () => rt,
        db,
        procName(proc),
        sender,
        proc.clock,
      ),
    );
    this.g.healthReads.pollsSeen(api, sender, db, () => this.g.sched.now());
    const rt: FleetRuntime = new FleetRuntime({
      clock: proc.clock,
      redis,
      sharedStore: (_r, node) => {
        const link = this.g.redis[db]!.link(node, proc.clock);
        link.faults = this.linkFaults[proc.node]!.link;
        link.request = () => routingRequest.getStore();
        link.answered = (c) => this.g.healthReads.note(c);
        link.sharing = () => rt.store.mode?.() !== 'local';
        this.g.calls.spreadsSeen(link);
        this.g.calls.grantsSeen(link, sender);
        return link;
      },
      api,
      log: silentLogger,
      seed: this.g.schedule.seed * 31 + proc.node * 7 + proc.gen,
      poller: { intervalMs: POLL_MS, timeoutMs: POLL_TIMEOUT_MS },
      leasePrefix: prefix,
      ...(seq ? { leaseSeq: seq } : {}),
      ...(this.w.configChanges ? { retainEveryMs: this.w.configChanges.retainEveryMs } : {}),
    });
    this.senders.set(rt, sender);
    this.watchRetakes(rt, prefix);
    this.passes.watch(rt.store, prefix);
    this.g.calls.budgetSeen(rt);
    this.g.calls.prefetchSeen(rt, procName(proc));
    return rt;
  }

  /**
   * Notes `rt`'s failover store's walks over its open leases: when a reclaim's registration ended
   * (its walk due at once), and when each walk began and ended. A walk ended took every lease it
   * held then again (or found it reclaimed by age); one cut off, or never begun once due, did not.
   * Wrapped on this instance only (a test may have planted a method on the prototype before);
   * they return as before.
   */
  private watchRetakes(rt: FleetRuntime, prefix: string): void {
    const store = rt.store as unknown as {
      registerReplicas?: (ups: boolean) => Promise<void>;
      leases?: { restore?: (shared: unknown, onlyLocal: boolean) => Promise<void> };
    };
    const { registerReplicas } = store;
    const leases = store.leases;
    const restore = leases?.restore;
    if (!registerReplicas || !leases || !restore) return;
    // One record per prefix, as the leases: a successor on the same state walks on with them.
    let walks = this.retakeWalks.get(prefix);
    if (!walks) this.retakeWalks.set(prefix, (walks = {}));
    const w = walks;
    const now = () => this.g.sched.now();
    // A reclaim registers with `ups` false and walks right after; a recovery replays releases between.
    store.registerReplicas = (ups) => {
      const p = registerReplicas.call(store, ups);
      if (!ups)
        p.then(
          () => (w.dueAt = now()),
          () => undefined,
        );
      return p;
    };
    leases.restore = (shared, onlyLocal) => {
      if (onlyLocal) return restore.call(leases, shared, onlyLocal);
      w.begunAt = now();
      const p = restore.call(leases, shared, onlyLocal);
      p.then(
        () => (w.endedAt = now()),
        () => undefined,
      );
      return p;
    };
  }

  /** A plugin-server process of node `n` starts (generation `gen`): no memory of any before it. */
  start(n: number, gen: number, db: number, clock: NodeClock, recordGen = 0): Process {
    const p = {
      node: n,
      gen,
      clock,
      alive: true,
      runtimes: [],
      services: [],
      routing: 0,
      open: 0,
      startedAt: this.g.sched.now(),
      db,
      recordGen,
    } as unknown as Process;
    p.registry = this.registry(p);
    this.currentService(p);
    this.startPoller(p);
    this.notePlugins(p);
    return p;
  }

  /** A `redis` record change on one node: a new runtime takes new requests, the old one drains (FleetRuntime.retire). */
  recordChange(n: number, otherState: boolean): void {
    const p = this.procs[n]!;
    if (!p.alive) {
      // The node is down (none before node-down: a restart starts the next process at once): its
      // next process starts with this record.
      if (otherState) p.db = 1 - p.db;
      p.recordGen++;
      this.pollerFollows(p);
      return;
    }
    // Kong's new instance on the new record, as the plugin makes it: the registry replaces the
    // runtime (same state: at once, keeping its node id; other state: once the configuration
    // registers there and claims the replicas the old one routes to).
    if (otherState) p.db = 1 - p.db;
    p.recordGen++;
    this.currentService(p);
    this.notePlugins(p);
    this.pollerFollows(p);
  }

  /** Notes when `store` begins to leave its state (dst/owed-ends-check.ts); on this instance only. */
  private watchLeave(store: FailoverFleetStore): void {
    const leave = store.leave.bind(store);
    store.leave = (maxMs) => {
      this.leaving.set(store, { at: this.g.sched.now(), maxMs });
      return leave(maxMs);
    };
  }

  /**
   * Kong pushes a router configuration to node `n` (a configuration change): a new plugin instance,
   * a new router service on the node's current runtime (src/runtime-registry.ts `sharedRuntime`:
   * the same `redis` record keeps its runtime), which registers the replicas again
   * (src/router/registration.ts). Requests under way stay on the service that took them.
   */
  pushConfig(n: number): void {
    const p = this.procs[n]!;
    if (!p.alive) return;
    this.currentService(p);
  }

  /** The plugin-server process of node `n` dies and Kong starts another: nothing of it is left. */
  restartProcess(n: number): void {
    const old = this.killProcess(n);
    if (old) this.startAgain(n, old);
  }

  /**
   * Node `n`'s process dies (nothing of it is left) and none runs there until `startAgain`: the
   * process, or undefined if none was running (the node is down).
   */
  killProcess(n: number): Process | undefined {
    const old = this.procs[n]!;
    if (!old.alive) return undefined;
    old.alive = false;
    // Its instances die with it: the new process starts on the current configuration only.
    for (let i = this.oldConfigs.length - 1; i >= 0; i--)
      if (this.oldConfigs[i]!.node === n) this.oldConfigs.splice(i, 1);
    for (const rt of old.runtimes) this.dead.add(rt.leasePrefix);
    this.g.calls.died(procName(old));
    for (const rt of old.runtimes) rt.stop();
    // Its timers never fire again: a new clock, the same skew.
    old.clock.alive = false;
    return old;
  }

  /** Kong starts node `n`'s process again after `old` died, unless another runs there already. */
  startAgain(n: number, old: Process): void {
    if (this.procs[n] !== old) return;
    this.dbUsedFrom[old.db] = Math.min(this.dbUsedFrom[old.db]!, this.g.sched.now());
    // Kong starts it with the node's current `redis` record (seed 65: not the first one).
    this.procs[n] = this.start(
      n,
      old.gen + 1,
      old.db,
      new NodeClock(this.g.sched, old.clock.skew),
      old.recordGen,
    );
  }

  /**
   * Requests `p` counts as held in its gateway (HeldClasses, every service's: a request leaves its
   * count when sent, refused or failed). The counts are the services' own (private): read here,
   * never changed.
   */
  heldInGateway(p: Process): number {
    // One count per runtime and configuration (slo-class.ts `heldOn`): a configuration pushed again
    // makes a service on the same runtime that shares its count (counted once).
    const counts = new Set(
      p.services.map((svc) => (svc as unknown as { held: { count: Map<number, number> } }).held.count),
    );
    let n = 0;
    for (const count of counts) for (const k of count.values()) n += k;
    return n;
  }

  /** Requests of live processes not ended (a dead one's end with its socket: Kong answers them). */
  liveOpen(): number {
    return this.procs.filter((p) => p.alive).reduce((n, p) => n + p.open, 0);
  }

  /** A lease of a live node still open, in Redis or in its local store: what, or null. */
  async openLease(): Promise<string | null> {
    const live = new Set<string>();
    for (const p of this.procs) if (p.alive) for (const rt of p.runtimes) live.add(rt.leasePrefix);
    // A state no live node uses any more is nobody's to clean (its leases go by age, once polled).
    const used = new Set(this.procs.filter((p) => p.alive).map((p) => p.db));
    for (const [i, r] of this.g.redis.entries())
      for (const [id, node] of used.has(i) ? r.openLeases() : [])
        if (live.has(node))
          return `db ${i}: lease ${id} of live node ${node} open after the last request ended`;
    for (const p of this.procs) {
      if (!p.alive) continue;
      for (const rt of p.runtimes) {
        const open = await (rt.store as FailoverFleetStore).local.inFlightTotal();
        if (open > 0) return `node ${p.node}: ${open} lease(s) open in its local store`;
      }
    }
    return null;
  }
}

function deepFreeze<T>(o: T): T {
  if (o !== null && typeof o === 'object' && !Object.isFrozen(o)) {
    Object.freeze(o);
    for (const v of Object.values(o as Record<string, unknown>)) deepFreeze(v);
  }
  return o;
}
