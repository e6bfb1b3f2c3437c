/**
 * The simulated world of one schedule: router nodes running the real code of src/ (FleetRuntime
 * with its failover store, held leases, outage budget, adapter manager, poller; RouterService with
 * placement, the hold and room waits), each node a plugin-server process on its own skewed clock
 * (node-processes.ts); the modelled Redis (redis-model.ts) under their failover stores; the
 * simulator's vLLM replicas (replicas.ts). Kong's part is modelled (request-routing.ts): it sends
 * each request to one node's access phase, proxies it to the replica chosen and runs the log phase
 * on the same process, if still alive. Here: the faults, the checks after each step, the settling.
 */
import { LOCK_MARGIN_MS } from '../src/adapters/idle-unload';
import type { FailoverFleetStore } from '../src/fleet/redis/failover-store';
import type { FleetRuntime } from '../src/runtime';
import type { RegistryLoss } from './trim-check';
import { seededRandom, type Random } from '../src/random';
import { CallsSeen } from './calls-seen';
import { HealthReads } from './health-reads';
import { InvariantBroken, LogChecks, type Violation, type WorldView } from './invariants';
import { clearSecondReleases, firstSecondRelease, forgetHandedLeases } from './lease-watch';
import { samplesOnly } from './metrics-samples';
import { NodeProcesses, redisConfig } from './node-processes';
import { owedEndHeld, OWED_ENDS_INVARIANT } from './owed-ends-check';
import { RedisModel } from './redis-model';
import { PASSES_INVARIANT } from './registration-passes';
import { registryLosses } from './registry-loss';
import { ReplicaSet } from './replicas';
import { RequestRouting } from './request-routing';
import type { Action, FaultKind, Schedule } from './schedule';
import { NodeClock, Scheduler, TRIP_MAX_MS } from './scheduler';
import { StepView } from './step-view';
import {
  BACKOFF_BASE_MS,
  LOAD_TIMEOUT_MS,
  NODE_TTL_MS,
  POLL_MS,
  PROBE_MS,
  REDIS_DOWN_MAX_MS,
  SETTLE_MS,
  SETTLE_TICK_MS,
  TAIL_MS,
  TIMER_BOUND,
  WAKEUP_SLACK,
} from './world-timings';

/** dst/bound-check.ts. */
export const BOUND_INVARIANT = 'a bounded class joins a replica at its bound only after its wait';

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
  /** Overload refusals answered: 503 `ttft_overload` (a hold's end) and `shed_low_priority`. */
  overloadRefusals: { ttftOverload: number; shed: number };
  /** Hold calls that held a request of a class bounded by `max_in_flight` at its bound. */
  boundWaits: number;
}

export class World {
  readonly sched: Scheduler;
  private readonly random: Random;
  private readonly redis: RedisModel[];
  private readonly replicas: ReplicaSet;
  /** The record of calls each replica saw. */
  private readonly calls: CallsSeen;
  /** The nodes' plugin-server processes. */
  private readonly nodes: NodeProcesses;
  /** The requests Kong sends, and what each met. */
  private readonly routing: RequestRouting;
  private readonly checks: LogChecks;
  /** By request (arrival number): the store calls its decision made, as answered. */
  private readonly healthReads = new HealthReads();
  private lastFaultAt = -Infinity;
  /**
   * By runtime: the last step after which its store decided alone (the answer check). Each of a
   * process's runtimes: one a same-state record change replaced still decides the requests under
   * way on it (seed 525755).
   */
  private readonly localAt = new WeakMap<FleetRuntime, number>();
  private lastRecordChange = -Infinity;
  /** Record changes to other state, from the first node's push to the last's. */
  private readonly stateMoves: { from: number; to: number }[] = [];
  /** Faults under way (partitions, slow links, a Redis down), healed by their own timers. */
  private faultsOpen = 0;
  /** When the last reply a healed slow link delayed is due: the settling runs from then (`slowRepliesOwed`). */
  private slowRepliesDueBy = -Infinity;
  /** A record change's pushes to the nodes not made yet. */
  private pushesPending = 0;
  private readonly fired = new Set<FaultKind>();
  private readonly firedBusy = new Set<FaultKind>();
  private violation: Violation | null = null;
  private readonly w: Schedule['world'];

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
      ...(this.w.maxNumSeqs !== undefined ? { maxNumSeqs: this.w.maxNumSeqs } : {}),
    });
    samplesOnly(schedule.seed, this.replicas);
    this.calls = new CallsSeen(this.sched, () => this.degraded());
    this.replicas.slowCallSeen = (hopMs) => this.calls.slowCallSeen(hopMs);
    const order = { n: 0 };
    this.redis = [0, 1].map(
      (db) => new RedisModel(this.sched, redisConfig(this.w, db, 0), this.random, order),
    );
    this.nodes = new NodeProcesses({
      sched: this.sched,
      random: this.random,
      redis: this.redis,
      replicas: this.replicas,
      schedule,
      calls: this.calls,
      healthReads: this.healthReads,
    });
    for (let n = 0; n < this.w.nodes; n++)
      this.nodes.procs.push(this.nodes.start(n, 0, 0, new NodeClock(this.sched)));
    this.routing = new RequestRouting({
      sched: this.sched,
      schedule,
      replicas: this.replicas,
      nodes: this.nodes,
      redis: this.redis,
      calls: this.calls,
      healthReads: this.healthReads,
      answers: {
        log: (url) => this.replicas.replica(url).log,
        restarts: (url) => this.replicas.registryLost.filter((r) => r.url === url),
        unloadExcused: (replica, adapter) => this.unloadExcused(replica, adapter),
        unloader: (replica, adapter) => this.calls.unloaders.get(`${replica}\u0000${adapter}`),
        rolledBack: (db) => this.redis[db]!.resets,
      },
      localAt: (rt) => this.localAt.get(rt) ?? -Infinity,
      lastFaultAt: () => this.lastFaultAt,
      lastRecordChange: () => this.lastRecordChange,
      view: () => this.view(),
      violate: (v) => {
        this.violation ??= v;
      },
    });
    this.checks = new LogChecks(
      this.replicas.replicas.map((r, i) => ({
        url: this.replicas.urls[i]!,
        log: r.log,
        word: () => {
          const e = r.engine.stats();
          const loaded = [...r.registry.values()].filter((a) => !a.static).map((a) => a.name);
          return { loaded, running: e.runningAdapters, waiting: e.waitingAdapters };
        },
        orphaned: () =>
          new Set(this.redis.flatMap((db) => db.adaptersLeasedBy(this.replicas.urls[i]!, this.nodes.dead))),
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
      (replica, adapter) => this.unloadExcused(replica, adapter),
      {
        loads: this.calls.loadCalls,
        claims: this.calls.loadClaims,
        unloads: this.calls.unloadCalls,
        decidedAt: (request) => this.routing.decidedAt.get(request),
        spreads: this.calls.spreads,
        failed: this.replicas.failedLoads,
        backoffMs: BACKOFF_BASE_MS,
        onTheWay: (replica, adapter) => this.routing.onTheWay(replica, adapter),
      },
      {
        ledgers: this.redis.map((r) => r.budget),
        refusals: this.routing.refusals,
        fate: (request) => {
          const f = this.routing.fates.get(request);
          return f?.answered ? 'answered' : f && !f.p.alive ? 'died' : undefined;
        },
      },
    );
  }

  /**
   * Whether the last unload of `adapter` on `replica` is not held to (i): its sender decided alone,
   * or the requests there were an unseen router's first (RequestRouting.unseenFirst).
   */
  private unloadExcused(replica: string, adapter: string): boolean {
    return (
      this.calls.unloaders.get(`${replica}\u0000${adapter}`)?.alone === true ||
      this.routing.unseenFirst(replica, adapter)
    );
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
    const used = (db: number) => this.redis[db]!.resets.filter((t) => t >= this.nodes.dbUsedFrom[db]!);
    return [...used(0), ...used(1), ...this.stateMoves];
  }

  /**
   * Of `resets`, those that may bring back state no call backs (a lock of a load that ended): the
   * shared state restored from an older copy, and the record changes' spans (the other state kept
   * what it held).
   */
  restores(): (number | { from: number; to: number })[] {
    const used = (db: number) => this.redis[db]!.restores.filter((t) => t >= this.nodes.dbUsedFrom[db]!);
    return [...used(0), ...used(1), ...this.stateMoves];
  }

  /** Replica restarts that forgot adapters loaded at run time, and when a registry read first saw each. */
  registryLost(): readonly RegistryLoss[] {
    return registryLosses(
      this.replicas.registryLost,
      this.redis.flatMap((r) => r.registryReads),
      this.redis.flatMap((r) => r.unloadLocks()),
    );
  }

  /** Whether a fault is under way now. */
  faultOpen(): boolean {
    return this.faultsOpen > 0;
  }

  /** Whether any node decides alone now, holds off its unloads, or a fault is under way. */
  degraded(): boolean {
    if (this.faultsOpen > 0) return true;
    for (const p of this.nodes.procs) if (p.alive && p.rt.store.mode?.() === 'local') return true;
    // A node whose unloads are held off (a record change from other state, Redis just back) keeps
    // an excess its after-load check found: a peer on the old state may be using it (seed 704).
    for (const p of this.nodes.procs)
      if (p.alive && p.runtimes.some((rt) => (rt.store as FailoverFleetStore).unloadsHeldOff?.()))
        return true;
    return false;
  }

  private afterStep(): void {
    if (this.violation) return;
    try {
      const w = this.view();
      this.checks.check(w);
      const past = this.routing.bound.check();
      if (past !== undefined) this.checks.fail(w, BOUND_INVARIANT, past);
      const owed = owedEndHeld(w.now, this.lastFaultAt, this.nodes, this.redis);
      if (owed !== undefined) this.checks.fail(w, OWED_ENDS_INVARIANT, owed);
      if (this.nodes.passes.over !== undefined) this.checks.fail(w, PASSES_INVARIANT, this.nodes.passes.over);
      const second = firstSecondRelease();
      if (second !== undefined)
        this.checks.fail(
          w,
          'every in-flight count released exactly once',
          `second release of ${second} (LeaseNotOpen)`,
        );
      for (const p of this.nodes.procs) {
        if (!p.alive) continue;
        for (const rt of p.runtimes) if (rt.store.mode?.() === 'local') this.localAt.set(rt, w.now);
        // Held only while deciding: a request refused (503 ttft_overload, shed_low_priority),
        // sent or failed leaves the count, or later requests of its class wait behind nothing.
        const held = this.nodes.heldInGateway(p);
        if (held > p.routing)
          this.checks.fail(
            w,
            'a request leaves the gateway when it ends',
            `node ${p.node}: ${held} request(s) counted as held with ${p.routing} routing`,
          );
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

  private fault(): void {
    this.lastFaultAt = this.sched.now();
  }

  /**
   * A slow link healing now still owes the replies it delayed, each up to its delay from now, and
   * on a link in order every later reply comes after them: until then each call on it, a probe's
   * ping too, may time out, so its node may still decide alone (seeds 26829, 30642).
   */
  private slowRepliesOwed(faults: readonly { link: { slowMs: number } }[], slowMs: number): void {
    for (const f of faults)
      this.slowRepliesDueBy = Math.max(
        this.slowRepliesDueBy,
        this.sched.now() + Math.max(slowMs, f.link.slowMs) + 2 * TRIP_MAX_MS,
      );
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
      if (this.routing.inFlight > 0 || this.calls.loadsInFlight > 0) this.firedBusy.add(a.kind);
    }
    switch (a.kind) {
      case 'request':
        return void this.routing.request(a);
      case 'partition':
      case 'slow': {
        const nodes = this.nodes.linkFaults.filter((_, n) => a.node < 0 || n === a.node);
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
          () => {
            if (a.kind === 'slow') this.slowRepliesOwed(nodes, a.slowMs);
            set(-1);
          },
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
        this.pushesPending += this.nodes.procs.length;
        return this.nodes.procs.forEach((_, n) =>
          this.sched.after(n * a.gapMs, () => {
            this.pushesPending--;
            this.nodes.recordChange(n, a.otherState);
          }),
        );
      case 'process-restart':
        this.fault();
        this.routing.died(this.nodes.procs[a.node]!);
        return this.nodes.restartProcess(a.node);
      case 'config-push':
        this.fault();
        return this.nodes.pushConfig(a.node);
      case 'skew':
        this.fault();
        this.nodes.procs[a.node]!.clock.skew = a.ms;
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

  async run(): Promise<RunResult> {
    clearSecondReleases();
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
        () => stop() || (this.nodes.liveOpen() === 0 && this.faultsOpen === 0),
      );
      // Then until the world is quiescent, or SETTLE_MS at most, before the lease check: from the
      // last reply a slow link owed, as a probe sent before it comes waits for it and times out.
      const settleBy = Math.max(this.sched.now(), this.slowRepliesDueBy) + SETTLE_MS;
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
      aloneLoads: this.calls.loadCalls.filter((c) => c.alone).length,
      overloadRefusals: { ...this.routing.overloadRefusals },
      boundWaits: this.routing.bound.boundWaits,
      ...(this.violation ? { violation: this.violation } : {}),
    };
  }

  /**
   * Quiescent: nothing left that could change what the lease check sees. No request under way,
   * no fault open or recent (a heartbeat or a probe still to find its end), no record change
   * still to reach a node, every live runtime sharing decisions again with nothing held or owed
   * (its lease list empty, no release to replay), no replica over the limit (its grace still
   * running), and no lease open.
   */
  private async settled(): Promise<boolean> {
    if (this.nodes.liveOpen() > 0 || this.faultsOpen > 0 || this.pushesPending > 0) return false;
    if (this.sched.now() - this.lastFaultAt < PROBE_MS || this.checks.overLimit()) return false;
    for (const p of this.nodes.procs)
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
    return (await this.nodes.openLease()) === null;
  }

  /** Every request ended and the world settled: no live node holds a lease, in Redis or alone. */
  private async quiescence(): Promise<void> {
    const w = this.view();
    if (this.routing.inFlight > 0 && this.nodes.liveOpen() === 0) return; // a dead process's request still runs
    const unanswered = this.nodes.liveOpen();
    const open = unanswered > 0 ? null : await this.nodes.openLease();
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

  private close(): void {
    for (const p of this.nodes.procs) for (const rt of p.runtimes) rt.stop();
    // The process-wide lease map (src/lease.ts) outlives a schedule: forget this world's leases.
    forgetHandedLeases();
  }
}
