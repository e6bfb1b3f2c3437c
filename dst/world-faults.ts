/**
 * The faults of one schedule, as the world applies them: cut and slow links (per node, counted so
 * overlapping faults heal in turn), the modelled Redis's restarts, FLUSHALLs and Sentinel switches,
 * Kong's record changes and configuration pushes, process restarts, clock skew, and the replicas'
 * faults. And what the checks read of them: when the last one began or healed, whether one is
 * under way, the record changes' spans, the kinds fired.
 */
import type { NodeLinkFaults, NodeProcesses, Process } from './node-processes';
import type { RedisModel } from './redis-model';
import type { ReplicaSet } from './replicas';
import type { Action, FaultKind, Schedule } from './schedule';
import { TRIP_MAX_MS, type Scheduler } from './scheduler';
import { REDIS_TIMEOUT_MS } from './world-timings';

/** What the faults act on. */
export interface FaultGround {
  sched: Scheduler;
  world: Schedule['world'];
  nodes: NodeProcesses;
  /** The shared states (databases 0 and 1): each fault of Redis hits both. */
  redis: readonly RedisModel[];
  replicas: ReplicaSet;
  /** Process `p` dies now (a process restart): the requests it was routing end with it. */
  died(p: Process): void;
}

export type FaultAction = Exclude<Action, { kind: 'request' }>;

export class WorldFaults {
  /** When the last fault began or healed. */
  lastFaultAt = -Infinity;
  /**
   * When the calls sent into the last partition have all timed out: a node may begin deciding alone
   * until then, after the heal (seed 1638475: a call sent 74 ms before the heal timed out 426 ms
   * after it; the node decided alone for a probe interval, then held unloads off for two).
   */
  partitionTimeoutsBy = -Infinity;
  /** When the last record change reaches its last node. */
  lastRecordChange = -Infinity;
  /** Record changes to other state, from the first node's push to the last's. */
  readonly stateMoves: { from: number; to: number }[] = [];
  /** Faults under way (partitions, slow links, a Redis down), healed by their own timers. */
  open = 0;
  /** When the last reply a healed slow link delayed is due: the settling runs from then (`slowRepliesOwed`). */
  slowRepliesDueBy = -Infinity;
  /** A record change's pushes to the nodes not made yet. */
  pushesPending = 0;
  readonly fired = new Set<FaultKind>();
  readonly firedBusy = new Set<FaultKind>();

  constructor(private readonly g: FaultGround) {}

  private fault(): void {
    this.lastFaultAt = this.g.sched.now();
  }

  /**
   * A slow link healing now still owes the replies it delayed, each up to its delay from now, and
   * on a link in order every later reply comes after them: until then each call on it, a probe's
   * ping too, may time out, so its node may still decide alone (seeds 26829, 30642).
   */
  private slowRepliesOwed(faults: readonly NodeLinkFaults[], slowMs: number): void {
    for (const f of faults)
      this.slowRepliesDueBy = Math.max(
        this.slowRepliesDueBy,
        this.g.sched.now() + Math.max(slowMs, f.link.slowMs) + 2 * TRIP_MAX_MS,
      );
  }

  /** Opens a fault for `ms`, then heals it. */
  private during(ms: number, open: () => void, heal: () => void): void {
    this.fault();
    this.open++;
    open();
    this.g.sched.after(ms, () => {
      heal();
      this.open--;
      this.fault();
    });
  }

  /** Applies fault `a`; `busy`: a request or a load call is under way (the coverage). */
  apply(a: FaultAction, busy: boolean): void {
    const { sched, nodes, redis, replicas } = this.g;
    this.fired.add(a.kind);
    if (busy) this.firedBusy.add(a.kind);
    switch (a.kind) {
      case 'partition':
      case 'slow': {
        const faults = nodes.linkFaults.filter((_, n) => a.node < 0 || n === a.node);
        const set = (d: number) =>
          faults.forEach((f) => {
            if (a.kind === 'partition') f.partitions += d;
            else f.slow += d;
            f.link.partitioned = f.partitions > 0;
            f.link.slowMs = f.slow > 0 ? Math.max(f.link.slowMs, a.kind === 'slow' ? a.slowMs : 0) : 0;
          });
        return this.during(
          a.ms,
          () => set(1),
          () => {
            if (a.kind === 'slow') this.slowRepliesOwed(faults, a.slowMs);
            else
              this.partitionTimeoutsBy = Math.max(
                this.partitionTimeoutsBy,
                sched.now() + REDIS_TIMEOUT_MS + 1,
              );
            set(-1);
          },
        );
      }
      case 'redis-restart':
        return this.during(
          a.downMs + 1,
          () => redis.forEach((r) => r.restart(a.downMs, !a.empty)),
          () => undefined,
        );
      case 'flushall':
        this.fault();
        return redis.forEach((r) => r.flushAll());
      case 'switch':
        this.fault();
        return redis.forEach((r) => r.switchPrimary(a.lost));
      case 'record-change':
        this.fault();
        this.lastRecordChange = sched.now() + (this.g.world.nodes - 1) * a.gapMs;
        if (a.otherState) this.stateMoves.push({ from: sched.now(), to: this.lastRecordChange });
        // Kong pushes the new configuration to its nodes in turn.
        this.pushesPending += nodes.procs.length;
        return nodes.procs.forEach((_, n) =>
          sched.after(n * a.gapMs, () => {
            this.pushesPending--;
            nodes.recordChange(n, a.otherState);
          }),
        );
      case 'process-restart':
        this.fault();
        // A node down has no process to restart (only with node-down: a restart never leaves one dead).
        if (!nodes.procs[a.node]!.alive) return;
        this.g.died(nodes.procs[a.node]!);
        return nodes.restartProcess(a.node);
      case 'node-down': {
        const p = nodes.procs[a.node]!;
        if (!p.alive) return void this.fault();
        this.g.died(p);
        nodes.killProcess(a.node);
        return this.during(
          a.ms,
          () => undefined,
          () => nodes.startAgain(a.node, p),
        );
      }
      case 'config-push':
        this.fault();
        return nodes.pushConfig(a.node);
      case 'config-change':
        this.fault();
        return nodes.changeConfig(
          a.node,
          a.replicas.map((i) => replicas.urls[i]!),
        );
      case 'move':
        // One record change more to other state (its own budget window there), as a record change's.
        this.fault();
        this.stateMoves.push({ from: sched.now(), to: sched.now() });
        this.lastRecordChange = Math.max(this.lastRecordChange, sched.now());
        return nodes.move(
          a.node,
          a.replicas.map((i) => replicas.urls[i]!),
        );
      case 'skew':
        this.fault();
        nodes.procs[a.node]!.clock.skew = a.ms;
        return;
      case 'replica-restart':
        return this.during(
          a.downMs + 1,
          () => replicas.restart(a.replica, a.downMs),
          () => undefined,
        );
      case 'replica-outage':
        return this.during(
          a.ms,
          () => replicas.outage(a.replica, a.ms, a.mode),
          () => undefined,
        );
      case 'scrape':
        return this.during(
          a.ms,
          () => replicas.breakScrapes(a.replica, a.ms, a.mode),
          () => undefined,
        );
      case 'slow-load':
        return this.during(
          a.ms + a.slowMs,
          () => replicas.slowLoads(a.replica, a.ms, a.slowMs),
          () => undefined,
        );
      case 'load-fail':
        this.fault();
        return replicas.failLoads(a.replica, a.count, a.failure);
      case 'slow-path':
        // A timing, not a fault of the shared state: it excuses no check (no fault time, not degraded).
        return replicas.slowPath(a.node, a.replica, a.ms, a.hopMs);
    }
  }
}
