/**
 * The simulated world of one schedule: router nodes running the real code of src/ (FleetRuntime
 * with its failover store, held leases, outage budget, adapter manager, poller; RouterService with
 * placement, the hold and room waits), each node a plugin-server process on its own skewed clock;
 * the modelled Redis (redis-model.ts) under their failover stores; the simulator's vLLM replicas
 * (replicas.ts). Kong's part is modelled: it sends each request to one node's access phase,
 * proxies it to the replica chosen and runs the log phase on the same process, if still alive.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { ReplicaHttp } from '../src/backends/http';
import { HttpReplicaApi } from '../src/backends/http-replica-api';
import { parseRouterConfig } from '../src/config/parse';
import type { RedisConfig } from '../src/config/redis-schema';
import type { RouterConfig } from '../src/config/router-schema';
import { FailoverFleetStore } from '../src/fleet/redis/failover-store';
import { LeaseHandle, LeaseNotOpen } from '../src/lease';
import { silentLogger } from '../src/log';
import { VLLM_SAMPLES } from '../src/metrics/replica-load';
import { seededRandom, type Random } from '../src/random';
import { UNSEEN_HOLD_MS } from '../src/adapters/replica-word';
import { LOCK_MARGIN_MS } from '../src/adapters/idle-unload';
import { unseenFirst, type SentRequest, type Unloader } from './unseen-check';
import { RouterService } from '../src/router/router';
import { FleetRuntime } from '../src/runtime';
import {
  InvariantBroken,
  LogChecks,
  type BudgetRefusal,
  type LoadCall,
  type PlacementSpread,
  type Violation,
  type WorldView,
} from './invariants';
import { waitedIdle } from './hold-check';
import type { UnloadCall } from './trim-check';
import { HealthReads, pastSeenDown } from './health-reads';
import { RedisModel, type LinkFaults, type RedisLink } from './redis-model';
import { ReplicaSet, urlParts } from './replicas';
import { NodeClock, Scheduler } from './scheduler';
import type { Action, FaultKind, Schedule } from './schedule';

const POLL_MS = 1000;
const POLL_TIMEOUT_MS = 1000;
/** A poll's trips and the store call that records what it saw. */
const SEEN_SLACK_MS = 500;
const PROBE_MS = 1000;
const NODE_TTL_MS = 2000;
/**
 * After the span: faults healed, traffic done, the world settles at most this long before the
 * lease check; less once it is quiescent (`settled`).
 */
const SETTLE_MS = 3 * PROBE_MS;
/** How often the settling looks whether the world is quiescent. */
const SETTLE_TICK_MS = 100;
/**
 * The longest the traffic's tail may run after the span (requests waiting for room, faults
 * healing): past the access deadline (55 s) and Kong's upstream timeout.
 */
const TAIL_MS = 70_000;
/** Bounded memory: wake-ups per node beyond one per request under way there. */
const WAKEUP_SLACK = 8;
const TIMER_BOUND = 20_000;
/** Kong's upstream read timeout (the proxy's 504), unless the world sets its own. */
const UPSTREAM_TIMEOUT_MS = 10_000;
/** queue_timeout_ms, unless the world sets its own. */
const QUEUE_TIMEOUT_MS = 8000;
/** backoff_base_ms (the Schema's default): a failed load is not tried again sooner by its runtime. */
const BACKOFF_BASE_MS = 1000;
/** load_timeout_ms: a decision (room wait and two load calls) ends before LEASE_CEILING x lease_max_age_ms. */
const LOAD_TIMEOUT_MS = 3000;
/** The longest a Redis restart keeps it down (schedule.ts draws `downMs` up to this). */
const REDIS_DOWN_MAX_MS = 3000;

/**
 * The request whose access phase is running (its arrival number): a load call sent within it is
 * that request's. The budget charges a request once however often it loads (docs/reliability.md,
 * "A request is charged once however often escalation moves it").
 */
const routingRequest = new AsyncLocalStorage<number>();

/** Parsed router configurations by their input (frozen: a runtime never changes its own). */
const configs = new Map<string, RouterConfig>();
const CONFIGS_KEPT = 256;

/** Every lease id the world handed out, for the end-of-run sweep of the process-wide map. */
const handed = new Set<string>();
/** A second release anywhere in src/ (LeaseNotOpen) is a violation: counted by wrapping release once. */
let secondReleases: string[] = [];
const take = LeaseHandle.take.bind(LeaseHandle);
LeaseHandle.take = async (...args: Parameters<typeof LeaseHandle.take>) => {
  const id = `${args[0].leasePrefix}-${args[0].leaseSeq.next.toString(36)}`;
  handed.add(id);
  return take(...args);
};
const release = LeaseHandle.prototype.release;
LeaseHandle.prototype.release = async function (this: LeaseHandle, status?: number) {
  try {
    return await release.call(this, status);
  } catch (err) {
    if (err instanceof LeaseNotOpen) secondReleases.push(err.leaseId);
    throw err;
  }
};

/** One plugin-server process of a node: its runtime(s) and the router service Kong calls. */
interface Process {
  node: number;
  gen: number;
  alive: boolean;
  clock: NodeClock;
  rt: FleetRuntime;
  svc: RouterService;
  /** Every runtime this process made (a record change adds one): their stores' checks. */
  runtimes: FleetRuntime[];

  /** Requests in its access phase now. */
  routing: number;
  /** Requests it took that have not ended (routing, proxied or logging). */
  open: number;
  startedAt: number;
  /** Which shared state its current runtime uses (0 or 1: two databases). */
  db: number;
  recordGen: number;
}

export interface RunResult {
  steps: number;
  violation?: Violation;
  simMs: number;
  /** The scheduler's digest of when each step fired (Scheduler.digest). */
  digest: number;
  /**
   * The fault kinds this schedule fired, and those fired while a request or a load call was
   * under way (the coverage the CLI prints: a fault on an idle world explores little).
   */
  faults: { fired: FaultKind[]; busy: FaultKind[] };
  /** Load calls a node sent deciding alone (its share of the budget): what a short node_ttl_ms runs. */
  aloneLoads: number;
}

export class World {
  readonly sched: Scheduler;
  private readonly random: Random;
  private readonly redis: RedisModel[];
  private readonly replicas: ReplicaSet;
  private readonly procs: Process[] = [];
  private readonly checks: LogChecks;
  /** By replica and adapter: the sender of the last unload there, whether it decided alone, its state and its word's time. */
  private readonly unloaders = new Map<string, Unloader>();
  /** By runtime and replica: when it last asked the replica's `/metrics`. */
  private readonly askedAt = new Map<string, number>();
  /** By replica and adapter: requests proxied there, by which process, whether it decided alone, until when. */
  private readonly proxied = new Map<string, SentRequest[]>();
  /** By lease prefix (a runtime's, shared by its successors on the same state): the state it uses. */
  private readonly prefixDb = new Map<string, number>();
  /** Load calls as each runtime sent them (the checks read them after each step). */
  private readonly loadCalls: LoadCall[] = [];
  /** The unload calls the runtimes sent, with the request whose decision sent each (none: a trim). */
  private readonly unloadCalls: UnloadCall[] = [];
  /** Placements a runtime claimed past another's, as Redis granted them (the one-load-per-burst check). */
  private readonly spreads: PlacementSpread[] = [];
  /** Requests answered 429 for the fleet's cold-load budget (the budget check reads them). */
  private readonly refusals: BudgetRefusal[] = [];
  /** By request (arrival number): its process, and whether its route answered. */
  private readonly fates = new Map<number, { p: Process; answered: boolean }>();
  /** By request: when its decision ended (route answered or threw). */
  private readonly decidedAt = new Map<number, number>();
  /** By runtime, replica and adapter: when the shared store last granted it an unload (its lock). */
  private readonly unloadGrants = new Map<string, number>();
  /** By request (arrival number): the store calls its decision made, as answered. */
  private readonly healthReads = new HealthReads();
  private lastFaultAt = -Infinity;
  private lastRecordChange = -Infinity;
  /** Record changes to other state, from the first node's push to the last's. */
  private readonly stateMoves: { from: number; to: number }[] = [];
  /** When a node first used each database: a state no node used yet loses nothing when emptied. */
  private readonly dbUsedFrom = [0, Infinity];
  /** Faults under way (partitions, slow links, a Redis down), healed by their own timers. */
  private faultsOpen = 0;
  /** A record change's pushes to the nodes not made yet. */
  private pushesPending = 0;
  private inFlight = 0;
  /** Load calls sent and not answered yet (any node). */
  private loadsInFlight = 0;
  private readonly fired = new Set<FaultKind>();
  private readonly firedBusy = new Set<FaultKind>();
  /** Requests that came so far. */
  private arrivals = 0;
  private violation: Violation | null = null;
  private readonly w: Schedule['world'];
  /** Per node (its host, whatever process runs there): the faults of its links to Redis. */
  private readonly linkFaults: { link: LinkFaults; partitions: number; slow: number }[];

  constructor(private readonly schedule: Schedule) {
    this.w = schedule.world;
    this.random = seededRandom(schedule.seed ^ 0x5bd1e995);
    this.sched = new Scheduler(seededRandom(schedule.seed ^ 0x27d4eb2f));
    this.replicas = new ReplicaSet(this.sched, {
      replicas: this.w.replicas,
      maxLoras: this.w.maxLoadedAdapters + this.w.nodes + 1,
      loadMs: this.w.loadMs,
      decodeMsPerStep: this.w.decodeMsPerStep,
      adapters: this.w.adapters,
      staticAdapters: this.w.staticAdapters ?? [],
    });
    this.samplesOnly();
    this.linkFaults = Array.from({ length: this.w.nodes }, () => ({
      link: { partitioned: false, slowMs: 0 },
      partitions: 0,
      slow: 0,
    }));
    this.redis = [0, 1].map((db) => new RedisModel(this.sched, this.redisConfig(db, 0), this.random));
    for (let n = 0; n < this.w.nodes; n++) this.procs.push(this.start(n, 0, 0, new NodeClock(this.sched)));
    this.checks = new LogChecks(
      this.replicas.replicas.map((r, i) => ({
        url: this.replicas.urls[i]!,
        log: r.log,
        word: () => {
          const e = r.engine.stats();
          const loaded = [...r.registry.values()].filter((a) => !a.static).map((a) => a.name);
          return { loaded, running: e.runningAdapters, waiting: e.waitingAdapters };
        },
      })),
      {
        maxLoadedAdapters: this.w.maxLoadedAdapters,
        nodes: this.w.nodes,
        coldLoadsPerMinute: this.w.coldLoadsPerMinute,
        excessGraceMs: 2 * POLL_MS + this.w.loadMs + 2 * PROBE_MS + 1000,
        quietAfterMs: (this.w.nodeTtlMs ?? NODE_TTL_MS) + 2 * PROBE_MS,
        // A load lock's TTL (load_timeout_ms and its margin), from a restart's end at the latest.
        staleLockMs: LOAD_TIMEOUT_MS + LOCK_MARGIN_MS + REDIS_DOWN_MAX_MS,
      },
      (replica, adapter) =>
        this.unloaders.get(`${replica}\u0000${adapter}`)?.alone === true ||
        this.unseenFirst(replica, adapter),
      {
        loads: this.loadCalls,
        unloads: this.unloadCalls,
        decidedAt: (request) => this.decidedAt.get(request),
        spreads: this.spreads,
        failed: this.replicas.failedLoads,
        backoffMs: BACKOFF_BASE_MS,
        onTheWay: (replica, adapter) => this.onTheWay(replica, adapter),
      },
      {
        ledgers: this.redis.map((r) => r.budget),
        refusals: this.refusals,
        fate: (request) => {
          const f = this.fates.get(request);
          return f?.answered ? 'answered' : f && !f.p.alive ? 'died' : undefined;
        },
      },
    );
  }

  private redisConfig(db: number, recordGen: number): RedisConfig {
    return {
      host: 'redis',
      port: 6379,
      // Same state, another record: only the timeout differs.
      timeout: 500 + (recordGen % 2),
      database: db,
      ssl: false,
      ssl_verify: false,
      prefix: 'lora:',
      node_ttl_ms: this.w.nodeTtlMs ?? NODE_TTL_MS,
    };
  }

  private routerConfig(redis: RedisConfig): RouterConfig {
    const raw = {
      replicas: this.replicas.urls.map((url) => ({ url })),
      base_model: 'meta-llama/Llama-3.1-8B-Instruct',
      adapter_path_template: '/adapters/{name}',
      adapter_name_pattern: '^[a-z,]+$',
      max_loaded_adapters: this.w.maxLoadedAdapters,
      cold_loads_per_minute: this.w.coldLoadsPerMinute,
      lease_max_age_ms: this.w.leaseMaxAgeMs,
      ttft_slo_ms: this.w.ttftSloMs,
      queue_timeout_ms: this.w.queueTimeoutMs ?? QUEUE_TIMEOUT_MS,
      load_timeout_ms: LOAD_TIMEOUT_MS,
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
    const rt: FleetRuntime = new FleetRuntime({
      clock: proc.clock,
      redis,
      sharedStore: (_r, node) => {
        const link = this.redis[db]!.link(node, proc.clock);
        link.faults = this.linkFaults[proc.node]!.link;
        link.request = () => routingRequest.getStore();
        link.answered = (c) => this.healthReads.note(c);
        this.spreadsSeen(link);
        this.grantsSeen(link, `${prefix}r${recordGen}`);
        return link;
      },
      api: new HttpReplicaApi(
        this.callsSeen(
          this.replicas.http(proc.clock, this.random, proc.alive, `${prefix}r${recordGen}`, proc.node),
          () => rt,
          db,
          `n${proc.node}g${proc.gen}`,
          `${prefix}r${recordGen}`,
          proc.clock,
        ),
      ),
      log: silentLogger,
      seed: this.schedule.seed * 31 + proc.node * 7 + proc.gen,
      poller: { intervalMs: POLL_MS, timeoutMs: POLL_TIMEOUT_MS },
      leasePrefix: prefix,
      ...(seq ? { leaseSeq: seq } : {}),
    });
    return rt;
  }

  /**
   * Three schedules in four: each replica's /metrics answer keeps only the samples the router
   * reads (VLLM_SAMPLES), so its parse reads a tenth of the text and gives the same figures (a
   * fault then garbles or cuts that text); the fourth reads the whole text, as vLLM writes it.
   */
  private samplesOnly(): void {
    if (this.schedule.seed % 4 === 0) return;
    for (const replica of this.replicas.replicas) {
      // The vLLM backend's metrics state (private to the simulator's replica): its text, cut as
      // it is rendered, so the answer's way (its microtasks) stays the same.
      const state = (replica as unknown as { api: { metricsState?: { text(): string } } }).api.metricsState;
      if (!state) continue;
      const text = state.text.bind(state);
      /** The last text rendered and what was kept of it (an idle replica's text repeats). */
      let last = { text: '', kept: '' };
      state.text = () => {
        const t = text();
        if (last.text !== t) last = { text: t, kept: samplesRead(t) };
        return last.kept;
      };
    }
  }

  /** Notes each placement a runtime claims, and wins, past another it saw (`seen`): a copy on purpose. */
  private spreadsSeen(link: RedisLink): void {
    const claim = link.claimPlacement.bind(link);
    link.claimPlacement = async (adapter, url, seen, ...rest) => {
      const placed = await claim(adapter, url, seen, ...rest);
      if (seen && seen !== url && placed === url)
        this.spreads.push({ at: this.sched.now(), adapter, url, past: seen });
      return placed;
    };
  }

  /** Notes when each unload lock the shared store grants a runtime (`sender`) was asked for. */
  private grantsSeen(link: RedisLink, sender: string): void {
    const begin = link.beginUnload.bind(link);
    link.beginUnload = async (url, adapter, ...rest) => {
      const asked = this.sched.now();
      const fence = await begin(url, adapter, ...rest);
      if (fence !== null) this.unloadGrants.set(`${sender}\u0000${url}\u0000${adapter}`, asked);
      return fence;
    };
  }

  /**
   * Notes, for each unload a runtime sends, whether it decided alone then (its store degraded):
   * such an unload (the after-load undo) cannot see requests other nodes route to the adapter.
   * Each load call goes to the checks with its sender (`proc`: the plugin-server process), the
   * time on its clock and whether it decided alone.
   */
  private callsSeen(
    http: ReplicaHttp,
    rt: () => FleetRuntime,
    db: number,
    proc: string,
    sender: string,
    clock: NodeClock,
  ): ReplicaHttp {
    const call = http.call.bind(http);
    http.call = (method, url, timeoutMs, body?) => {
      const name = (body as { lora_name?: string } | undefined)?.lora_name;
      const alone = rt().store.mode?.() === 'local';
      const origin = urlParts(url).origin;
      if (url.endsWith('/metrics')) this.askedAt.set(`${sender}\u0000${origin}`, this.sched.now());
      if (url.endsWith('/v1/unload_lora_adapter') && name !== undefined) {
        this.unloaders.set(`${origin}\u0000${name}`, {
          proc,
          alone,
          db,
          wordAt: this.askedAt.get(`${sender}\u0000${origin}`) ?? -Infinity,
        });
        const grant = `${sender}\u0000${origin}\u0000${name}`;
        const grantedAt = this.unloadGrants.get(grant);
        this.unloadGrants.delete(grant);
        const sent: UnloadCall = {
          at: this.sched.now(),
          url: origin,
          name,
          request: routingRequest.getStore(),
          alone,
          ...(grantedAt === undefined ? {} : { grantedAt }),
        };
        this.unloadCalls.push(sent);
        const reply = call(method, url, timeoutMs, body);
        // As a load's below: beside the caller's handlers, so its answer comes no later.
        const done = () => {
          sent.endedAt = this.sched.now();
        };
        reply.then(done, done);
        return reply;
      }
      if (!url.endsWith('/v1/load_lora_adapter') || name === undefined)
        return call(method, url, timeoutMs, body);
      const sent: LoadCall = {
        at: this.sched.now(),
        clockAt: clock.now(),
        url: urlParts(url).origin,
        name,
        proc,
        sender,
        alone,
        degraded: this.degraded(),
        request: routingRequest.getStore(),
      };
      this.loadCalls.push(sent);
      this.loadsInFlight++;
      const reply = call(method, url, timeoutMs, body);
      // Beside the caller's own handlers, not chained before them: its answer comes no later.
      const done = () => {
        sent.endedAt = this.sched.now();
        this.loadsInFlight--;
      };
      reply.then(done, () => {
        sent.gaveUpAt = this.sched.now();
        done();
      });
      return reply;
    };
    return http;
  }

  /** A plugin-server process of node `n` starts (generation `gen`): no memory of any before it. */
  private start(n: number, gen: number, db: number, clock: NodeClock, recordGen = 0): Process {
    const p = { node: n, gen, clock, alive: true } as Process;
    const rt = this.runtime({ ...p, alive: () => p.alive }, db, recordGen, `n${n}g${gen}`);
    Object.assign(p, {
      rt,
      svc: new RouterService(this.routerConfig(this.redisConfig(db, recordGen)), rt),
      runtimes: [rt],
      routing: 0,
      open: 0,
      startedAt: this.sched.now(),
      db,
      recordGen,
    });
    return p;
  }

  /**
   * The world as the checks see it now. `degraded` and `resets` are read only when a check needs
   * them (a new log entry, a replica over the limit, a load call): most steps need neither, and
   * the checks run after every step.
   */
  private view(): WorldView {
    return new StepView(this.sched.now(), this.sched.steps, this.lastFaultAt, this);
  }

  /**
   * Times either shared state was emptied, and the spans of record changes to other state (one
   * budget more each: the old and the new state each keep a window until the last node moves).
   */
  resets(): (number | { from: number; to: number })[] {
    // Each fault empties both databases at once: one not used yet by any node counts for nothing
    // (counted, it allowed the fleet two budgets more per FLUSHALL, restart or lossy switch).
    const used = (db: number) => this.redis[db]!.resets.filter((t) => t >= this.dbUsedFrom[db]!);
    return [...used(0), ...used(1), ...this.stateMoves];
  }

  /**
   * Of `resets`, those that may bring back state no call backs (a lock of a load that ended): the
   * shared state restored from an older copy, and the record changes' spans (the other state kept
   * what it held).
   */
  restores(): (number | { from: number; to: number })[] {
    const used = (db: number) => this.redis[db]!.restores.filter((t) => t >= this.dbUsedFrom[db]!);
    return [...used(0), ...used(1), ...this.stateMoves];
  }

  /** Whether a fault is under way now. */
  faultOpen(): boolean {
    return this.faultsOpen > 0;
  }

  /** Whether any node decides alone now, holds off its unloads, or a fault is under way. */
  degraded(): boolean {
    if (this.faultsOpen > 0) return true;
    for (const p of this.procs) if (p.alive && p.rt.store.mode?.() === 'local') return true;
    // A node whose unloads are held off (a record change from other state, Redis just back) keeps
    // an excess its after-load check found: a peer on the old state may be using it (seed 704).
    for (const p of this.procs)
      if (p.alive && p.runtimes.some((rt) => (rt.store as FailoverFleetStore).unloadsHeldOff?.()))
        return true;
    return false;
  }

  private afterStep(): void {
    if (this.violation) return;
    try {
      const w = this.view();
      this.checks.check(w);
      if (secondReleases.length > 0)
        this.checks.fail(
          w,
          'every in-flight count released exactly once',
          `second release of ${secondReleases[0]} (LeaseNotOpen)`,
        );
      for (const p of this.procs) {
        if (!p.alive) continue;
        for (const rt of p.runtimes) {
          const waiting = rt.manager.roomChanged.waiting;
          if (waiting > p.routing + WAKEUP_SLACK)
            this.checks.fail(
              w,
              'bounded memory',
              `node ${p.node}: ${waiting} wake-ups left with ${p.routing} requests routing`,
            );
        }
      }
      if (this.sched.pending > TIMER_BOUND)
        this.checks.fail(w, 'bounded memory', `${this.sched.pending} timers pending`);
    } catch (err) {
      if (err instanceof InvariantBroken) this.violation = err.v;
      else throw err;
    }
  }

  /** The longest an idle fleet may take to route a request: its load, an unload making room, polls and probes. */
  private holdBoundMs(): number {
    return 2 * this.w.loadMs + 2 * PROBE_MS + POLL_MS;
  }

  private fault(): void {
    this.lastFaultAt = this.sched.now();
  }

  /** Opens a fault for `ms`, then heals it. */
  private during(ms: number, open: () => void, heal: () => void): void {
    this.fault();
    this.faultsOpen++;
    open();
    this.sched.after(ms, () => {
      heal();
      this.faultsOpen--;
      this.fault();
    });
  }

  private apply(a: Action): void {
    if (a.kind !== 'request') {
      this.fired.add(a.kind);
      if (this.inFlight > 0 || this.loadsInFlight > 0) this.firedBusy.add(a.kind);
    }
    switch (a.kind) {
      case 'request':
        return void this.request(a);
      case 'partition':
      case 'slow': {
        const nodes = this.linkFaults.filter((_, n) => a.node < 0 || n === a.node);
        const set = (d: number) =>
          nodes.forEach((f) => {
            if (a.kind === 'partition') f.partitions += d;
            else f.slow += d;
            f.link.partitioned = f.partitions > 0;
            f.link.slowMs = f.slow > 0 ? Math.max(f.link.slowMs, a.kind === 'slow' ? a.slowMs : 0) : 0;
          });
        return this.during(
          a.ms,
          () => set(1),
          () => set(-1),
        );
      }
      case 'redis-restart':
        return this.during(
          a.downMs + 1,
          () => this.redis.forEach((r) => r.restart(a.downMs, !a.empty)),
          () => undefined,
        );
      case 'flushall':
        this.fault();
        return this.redis.forEach((r) => r.flushAll());
      case 'switch':
        this.fault();
        return this.redis.forEach((r) => r.switchPrimary(a.lost));
      case 'record-change':
        this.fault();
        this.lastRecordChange = this.sched.now() + (this.w.nodes - 1) * a.gapMs;
        if (a.otherState) this.stateMoves.push({ from: this.sched.now(), to: this.lastRecordChange });
        // Kong pushes the new configuration to its nodes in turn.
        this.pushesPending += this.procs.length;
        return this.procs.forEach((_, n) =>
          this.sched.after(n * a.gapMs, () => {
            this.pushesPending--;
            this.recordChange(n, a.otherState);
          }),
        );
      case 'process-restart':
        this.fault();
        return this.restartProcess(a.node);
      case 'skew':
        this.fault();
        this.procs[a.node]!.clock.skew = a.ms;
        return;
      case 'replica-restart':
        return this.during(
          a.downMs + 1,
          () => this.replicas.restart(a.replica, a.downMs),
          () => undefined,
        );
      case 'replica-outage':
        return this.during(
          a.ms,
          () => this.replicas.outage(a.replica, a.ms, a.mode),
          () => undefined,
        );
      case 'scrape':
        return this.during(
          a.ms,
          () => this.replicas.breakScrapes(a.replica, a.ms, a.mode),
          () => undefined,
        );
      case 'slow-load':
        return this.during(
          a.ms + a.slowMs,
          () => this.replicas.slowLoads(a.replica, a.ms, a.slowMs),
          () => undefined,
        );
      case 'load-fail':
        this.fault();
        return this.replicas.failLoads(a.replica, a.count, a.failure);
      case 'slow-path':
        // A timing, not a fault of the shared state: it excuses no check (no fault time, not degraded).
        return this.replicas.slowPath(a.node, a.replica, a.ms, a.hopMs);
    }
  }

  /** A `redis` record change on one node: a new runtime takes new requests, the old one drains (FleetRuntime.retire). */
  private recordChange(n: number, otherState: boolean): void {
    const p = this.procs[n]!;
    if (!p.alive) return;
    const old = p.rt;
    const db = otherState ? 1 - p.db : p.db;
    const recordGen = p.recordGen + 1;
    const same = !otherState;
    const rt = this.runtime(
      { node: n, gen: p.gen, clock: p.clock, alive: () => p.alive },
      db,
      recordGen,
      same ? old.leasePrefix : `n${n}g${p.gen}r${recordGen}`,
      same ? old.leaseSeq : undefined,
    );
    p.rt = rt;
    p.db = db;
    this.dbUsedFrom[db] = Math.min(this.dbUsedFrom[db]!, this.sched.now());
    p.recordGen = recordGen;
    p.runtimes.push(rt);
    p.svc = new RouterService(this.routerConfig(this.redisConfig(db, recordGen)), rt);
    // As the registry's `replace` (src/runtime-registry.ts).
    old.retire(rt).catch(() => undefined);
  }

  /** The plugin-server process of node `n` dies and Kong starts another: nothing of it is left. */
  private restartProcess(n: number): void {
    const old = this.procs[n]!;
    old.alive = false;
    for (const rt of old.runtimes) rt.stop();
    // Its timers never fire again: a new clock, the same skew.
    old.clock.alive = false;
    // Kong starts it with the node's current `redis` record (seed 65: not the first one).
    this.procs[n] = this.start(
      n,
      old.gen + 1,
      old.db,
      new NodeClock(this.sched, old.clock.skew),
      old.recordGen,
    );
  }

  private async request(a: Extract<Action, { kind: 'request' }>): Promise<void> {
    const p = this.procs[a.node]!;
    if (!p.alive) return;
    const named = [...this.w.adapters, ...(this.w.staticAdapters ?? [])];
    const model = a.adapter < 0 ? 'meta-llama/Llama-3.1-8B-Instruct' : named[a.adapter]!;
    const body = JSON.stringify({
      model,
      messages: [{ role: 'user', content: 'x '.repeat(a.prompt) }],
      max_tokens: a.tokens,
    });
    // Alone on an idle fleet: nothing else can change while it routes (the hold's invariant).
    const alone = this.inFlight === 0;
    const arrivals = ++this.arrivals;
    const began = this.sched.now();
    this.inFlight++;
    p.open++;
    p.routing++;
    let routing = true;
    const fate = { p, answered: false };
    this.fates.set(arrivals, fate);
    // Counted out of routing once, whether route answered or threw.
    const routed = () => {
      routing = false;
      p.routing--;
      fate.answered = true;
      this.decidedAt.set(arrivals, this.sched.now());
    };
    const svc = p.svc;
    let sent: SentRequest | undefined;
    try {
      const out = await routingRequest.run(arrivals, () => svc.route({ path: '/v1/chat/completions', body }));
      routed();
      if (out.kind === 'respond' && refusedForFleetBudget(out.status, out.body))
        this.refusals.push({ at: this.sched.now(), request: arrivals });
      const took = this.sched.now() - began;
      const scope = {
        lastFaultAt: this.lastFaultAt,
        lastRecordChange: this.lastRecordChange,
        boundMs: this.holdBoundMs(),
      };
      if (waitedIdle({ began, took, alone, last: arrivals === this.arrivals }, scope)) {
        const w = this.view();
        this.violation ??= {
          invariant: 'a hold never waits with nothing that could change',
          detail: `${model} alone on an idle fleet routed after ${Math.round(took)} ms`,
          at: w.now,
          step: w.step,
        };
      }
      if (out.kind !== 'proxy' || !p.alive) return;
      this.avoided(p, urlParts(out.url).origin, arrivals);
      if (a.adapter >= 0) {
        const key = `${urlParts(out.url).origin}\u0000${model}`;
        let list = this.proxied.get(key);
        if (!list) this.proxied.set(key, (list = []));
        // The state its lease is on: the runtime that decided it (after a record change to other
        // state, a request waiting for room is decided again on the new one).
        const prefix = out.leaseId.slice(0, out.leaseId.lastIndexOf('-'));
        list.push(
          (sent = {
            proc: `n${p.node}g${p.gen}`,
            alone: p.rt.store.mode?.() === 'local',
            db: this.prefixDb.get(prefix) ?? p.db,
            at: this.sched.now(),
            reached: Infinity,
            ended: Infinity,
          }),
        );
      }
      const status = await this.replicas.proxy(
        urlParts(out.url).origin,
        '/v1/chat/completions',
        out.body ?? body,
        this.w.upstreamTimeoutMs ?? UPSTREAM_TIMEOUT_MS,
        p.node,
        () => {
          if (sent) sent.reached = this.sched.now();
        },
      );
      // The log phase, on the process that routed it (a dead one never runs it).
      if (!p.alive) return;
      await svc.finish(out.leaseId, status);
    } finally {
      if (sent) sent.ended = this.sched.now();
      this.healthReads.forget(arrivals);
      if (routing) routed();
      this.inFlight--;
      p.open--;
    }
  }

  /**
   * Whether every request under way on `adapter` at `replica` when its unload went out is an unseen
   * router's first there (dst/unseen-check.ts): docs/reliability.md ("An adapter someone unseen
   * routes is held", not covered) leaves it to chance (seeds 1026501, 37593). Any other busy unload
   * is (i) broken.
   */
  private unseenFirst(replica: string, adapter: string): boolean {
    const key = `${replica}\u0000${adapter}`;
    const u = this.unloaders.get(key);
    return u !== undefined && unseenFirst(this.proxied.get(key) ?? [], u, this.sched.now(), UNSEEN_HOLD_MS);
  }

  /**
   * Requests routed to `adapter` at `replica` by a live process, not there yet: a dead process's
   * leases go with it (pruned once it is found silent), so its requests hold nothing.
   */
  private onTheWay(replica: string, adapter: string): number {
    const now = this.sched.now();
    const live = (proc: string) => this.procs.some((p) => p.alive && `n${p.node}g${p.gen}` === proc);
    const sent = this.proxied.get(`${replica}\u0000${adapter}`) ?? [];
    return sent.filter((r) => (r.reached ?? r.at) > now && r.ended > now && live(r.proc)).length;
  }

  /**
   * A replica down (refused, hanging, answering 500) since before this process and its runtime's
   * state began, and for longer than its poller takes to see it, gets no request from it while
   * another replica is up (test/reliability/faults.test.ts's "once seen, none goes there"). Not
   * counted: the time request `arrival` waited on replies a slow link made late since its last
   * read of health (dst/health-reads.ts, seed 516051).
   */
  private avoided(p: Process, origin: string, arrival: number): void {
    const d = this.replicas.down(origin, POLL_MS, POLL_TIMEOUT_MS);
    if (!d || d.since < Math.max(p.startedAt, this.lastRecordChange)) return;
    const now = this.sched.now();
    if (!pastSeenDown(now, d, this.healthReads.lateMs(arrival, now), SEEN_SLACK_MS)) return;
    // Every replica down, its scrape failing, or back too recently for a poll to have seen it
    // (seeds 1046, 102325): the router fails open and may have nowhere better to send it.
    const up = (u: string) => {
      const r = this.replicas.up(u, POLL_MS, POLL_TIMEOUT_MS);
      return r !== null && pastSeenDown(now, r, 0, SEEN_SLACK_MS);
    };
    if (!this.replicas.urls.some(up)) return;
    const w = this.view();
    this.violation ??= {
      invariant: 'a replica seen down gets no request',
      detail: `node ${p.node} routed to ${origin}, down for ${Math.round(now - d.since)} ms`,
      at: w.now,
      step: w.step,
    };
  }

  async run(): Promise<RunResult> {
    secondReleases = [];
    for (const a of this.schedule.actions) this.sched.after(a.at, () => this.apply(a));
    // Snapshots (RDB saves) six a span (every second of a 6 s one), for restarts from an older one.
    const every = this.w.spanMs / 6;
    for (let t = every / 2; t < this.w.spanMs; t += every)
      this.sched.after(t, () => this.redis.forEach((r) => r.takeSnapshot()));
    const stop = () => this.violation !== null;
    const step = () => this.afterStep();
    try {
      await this.sched.run(this.w.spanMs, step, stop);
      // Traffic stops; faults heal by their timers. Settle until every request ended.
      // Past the access deadline (55 s) and the upstream timeout after the last request came.
      await this.sched.run(
        this.sched.now() + TAIL_MS,
        step,
        () => stop() || (this.liveOpen() === 0 && this.faultsOpen === 0),
      );
      // Then until the world is quiescent, or SETTLE_MS at most, before the lease check.
      const settleBy = this.sched.now() + SETTLE_MS;
      while (!stop() && this.sched.now() < settleBy && !(await this.settled()))
        await this.sched.run(Math.min(settleBy, this.sched.now() + SETTLE_TICK_MS), step, stop);
      if (!stop()) await this.quiescence();
    } finally {
      this.close();
    }
    return {
      steps: this.sched.steps,
      simMs: this.sched.now(),
      digest: this.sched.digest,
      faults: { fired: [...this.fired], busy: [...this.firedBusy] },
      aloneLoads: this.loadCalls.filter((c) => c.alone).length,
      ...(this.violation ? { violation: this.violation } : {}),
    };
  }

  /** Requests of live processes not ended (a dead one's end with its socket: Kong answers them). */
  private liveOpen(): number {
    return this.procs.filter((p) => p.alive).reduce((n, p) => n + p.open, 0);
  }

  /**
   * Quiescent: nothing left that could change what the lease check sees. No request under way,
   * no fault open or recent (a heartbeat or a probe still to find its end), no record change
   * still to reach a node, every live runtime sharing decisions again with nothing held or owed
   * (its lease list empty, no release to replay), no replica over the limit (its grace still
   * running), and no lease open.
   */
  private async settled(): Promise<boolean> {
    if (this.liveOpen() > 0 || this.faultsOpen > 0 || this.pushesPending > 0) return false;
    if (this.sched.now() - this.lastFaultAt < PROBE_MS || this.checks.overLimit()) return false;
    for (const p of this.procs)
      if (p.alive)
        for (const rt of p.runtimes) {
          const store = rt.store as FailoverFleetStore;
          if (store.mode() !== 'redis' || store.unloadsHeldOff()) return false;
          // The lease list is the failover store's own (private): read here, never changed.
          const held = (
            store as unknown as { leases: { mine: Map<string, unknown>; pendingReleases: Set<string> } }
          ).leases;
          if (held.mine.size > 0 || held.pendingReleases.size > 0) return false;
        }
    return (await this.openLease()) === null;
  }

  /** Every request ended and the world settled: no live node holds a lease, in Redis or alone. */
  private async quiescence(): Promise<void> {
    const w = this.view();
    if (this.inFlight > 0 && this.liveOpen() === 0) return; // a dead process's request still runs
    const unanswered = this.liveOpen();
    const open = unanswered > 0 ? null : await this.openLease();
    if (unanswered > 0)
      this.violation = {
        invariant: 'every request answered',
        detail: `${unanswered} request(s) unanswered 70 s after the last came`,
        at: w.now,
        step: w.step,
      };
    else if (open !== null)
      this.violation = {
        invariant: 'no lease left open after quiescence',
        detail: open,
        at: w.now,
        step: w.step,
      };
  }

  /** A lease of a live node still open, in Redis or in its local store: what, or null. */
  private async openLease(): Promise<string | null> {
    const live = new Set<string>();
    for (const p of this.procs) if (p.alive) for (const rt of p.runtimes) live.add(rt.leasePrefix);
    // A state no live node uses any more is nobody's to clean (its leases go by age, once polled).
    const used = new Set(this.procs.filter((p) => p.alive).map((p) => p.db));
    for (const [i, r] of this.redis.entries())
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

  private close(): void {
    for (const p of this.procs) for (const rt of p.runtimes) rt.stop();
    // The process-wide lease map (src/lease.ts) outlives a schedule: forget this world's leases.
    for (const id of handed) LeaseHandle.find(id)?.agedOut();
    handed.clear();
  }
}

/**
 * The world as the checks see it at a step. `degraded` and `resets` are read only when a check
 * needs them (a new log entry, a replica over the limit, a load call): most steps need neither,
 * and the checks run after every step.
 */
class StepView implements WorldView {
  private d: boolean | undefined;
  private r: (number | { from: number; to: number })[] | undefined;

  constructor(
    readonly now: number,
    readonly step: number,
    readonly lastFaultAt: number,
    private readonly world: World,
  ) {}

  get degraded(): boolean {
    return (this.d ??= this.world.degraded());
  }

  get resets(): readonly (number | { from: number; to: number })[] {
    return (this.r ??= this.world.resets());
  }

  get restores(): readonly (number | { from: number; to: number })[] {
    return this.world.restores();
  }

  get faultOpen(): boolean {
    return this.world.faultOpen();
  }
}

/** A 429 for the fleet's cold-load budget (errors.coldLoadBudget, scope fleet). */
function refusedForFleetBudget(status: number, body: unknown): boolean {
  const e = (body as { error?: { code?: string; message?: string } } | undefined)?.error;
  return status === 429 && e?.code === 'rate_limit_exceeded' && e.message?.includes('the fleet has') === true;
}

/** The lines of a vLLM /metrics text whose sample the router reads (no comments). */
function samplesRead(text: string): string {
  let kept = '';
  const n = text.length;
  // The next `{` at or after where it was last looked for (n: none left): each found once.
  let brace = -1;
  for (let pos = 0; pos < n; ) {
    let end = text.indexOf('\n', pos);
    if (end < 0) end = n;
    if (end > pos && text.charCodeAt(pos) !== 35 /* # */) {
      // The name ends at the line's first `{` or space, or with the line.
      if (brace < pos) {
        const b = text.indexOf('{', pos);
        brace = b < 0 ? n : b;
      }
      let nameEnd = Math.min(brace, end);
      const space = text.indexOf(' ', pos);
      if (space >= 0 && space < nameEnd) nameEnd = space;
      if (VLLM_SAMPLES.has(text.slice(pos, nameEnd)))
        kept += end < n ? text.slice(pos, end + 1) : `${text.slice(pos, n)}\n`;
    }
    pos = end + 1;
  }
  return kept;
}

function deepFreeze<T>(o: T): T {
  if (o !== null && typeof o === 'object' && !Object.isFrozen(o)) {
    Object.freeze(o);
    for (const v of Object.values(o as Record<string, unknown>)) deepFreeze(v);
  }
  return o;
}
