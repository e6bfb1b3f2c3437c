/**
 * The outage of the shared store as one node sees it: while it does not answer, this node
 * decides alone, probes it every `probeMs` and logs at most every `logEveryMs`; once it is back
 * (or another state was switched to), this node unloads nothing for a hold-off, because peers may
 * still decide where they cannot see this node's unloads.
 */
import { monotonic, type Clock } from '../../clock';
import type { Logger } from '../../log';
import { Signal } from '../../signal';
import type { SharedStore } from './shared-store';

/** Probe intervals after the shared store comes back during which this node unloads nothing. */
export const UNLOAD_HOLD_OFF_PROBES = 2;

export interface FailoverOptions {
  /** How often a degraded node checks whether the shared store is back. */
  probeMs: number;
  /** While degraded, "still unreachable" is logged at most this often. */
  logEveryMs: number;
  /**
   * How long a decision waits for a recovery's last pass (`Outage.recovering`) before it decides
   * alone: one shared call's timeout (the `redis` record's `timeout`). Unset: `probeMs`.
   */
  recoveryWaitMs?: number;
}

/** A node's options when none are given: probes every second, "still unreachable" every 30 s. */
export const FAILOVER_DEFAULTS: FailoverOptions = { probeMs: 1000, logEveryMs: 30_000 };

export class Outage {
  /** Since when this node decides alone, or null while the shared store answers. */
  private degradedSince: number | null = null;
  /** When the shared store last came back to this node (its monotonic clock); null if never lost. */
  private backSince: number | null = null;
  /** Record changes into this store whose old runtime still decides (`receiving`): no unload meanwhile. */
  private recordChanges = 0;
  private lastLog = 0;
  /** Cancels the next probe while degraded. */
  private cancelProbe: (() => void) | null = null;
  private probing = false;
  /** The probe under way (or the last one): it never rejects (`probeEnded`). */
  private probeRun: Promise<void> = Promise.resolve();
  private shut = false;
  /**
   * Set while a recovery's last pass runs (`recovering`), told when the probe that runs it ends:
   * decisions wait for it rather than decide alone.
   */
  private recovery: Signal | null = null;

  /**
   * `handBack`: after a probe found the shared store answering, hands it what this node decided
   * alone; true when all of it was taken (the outage ends), false to go on at the next probe.
   */
  constructor(
    private readonly shared: SharedStore,
    private readonly log: Logger,
    readonly options: FailoverOptions,
    private readonly clock: Clock,
    private readonly handBack: () => Promise<boolean>,
  ) {}

  /**
   * Told as decisions are shared again, before any is made, and when the shared state is found
   * emptied or on another server (FleetStore's `onSharedAgain`).
   */
  onSharedAgain: (() => void) | null = null;

  get degraded(): boolean {
    return this.degradedSince !== null;
  }

  /**
   * Runs `op` on the shared store unless degraded; on failure degrades and runs `fallback`. While
   * a recovery's last pass runs, waits for it first (at most `recoveryWaitMs`): decided alone, each
   * admission and release gave that pass more to hand back, and under steady traffic (one request
   * per round trip) no pass was ever the last, so the node decided alone as long as the traffic
   * lasted, Redis healthy (test/core/failover-recovery.test.ts, "steady traffic").
   */
  async decide<T>(op: (s: SharedStore) => Promise<T>, fallback: () => Promise<T>): Promise<T> {
    if (this.degradedSince !== null) {
      if (this.recovery === null) return fallback();
      await this.recovery.wait(this.clock, this.options.recoveryWaitMs ?? this.options.probeMs);
      // The recovery failed, or outlasted the wait: decided alone, as before it began.
      if (this.degradedSince !== null) return fallback();
    }
    try {
      return await op(this.shared);
    } catch (err) {
      this.degrade(err as Error);
      return fallback();
    }
  }

  degrade(err: Error): void {
    if (this.degradedSince !== null) return;
    this.degradedSince = this.clock.now();
    this.lastLog = this.degradedSince;
    // Closed (a retired runtime's store, called by a decision that ended late): it answers from
    // local state, and no probe runs, or it would probe a closed link for the rest of the process.
    if (this.shut) return;
    this.log.error(
      `shared fleet state unavailable (${err.message}): this node decides from its own state, loads only into free slots and evicts nothing until it returns`,
    );
    this.scheduleProbe();
  }

  /** The next probe, one `probeMs` after the last one ended, while degraded. */
  private scheduleProbe(): void {
    this.cancelProbe = this.clock.after(this.options.probeMs, () => {
      this.probeRun = this.probe().finally(() => {
        if (this.degradedSince !== null && this.cancelProbe !== null) this.scheduleProbe();
      });
    });
  }

  private async probe(): Promise<void> {
    if (this.probing) return;
    this.probing = true;
    try {
      await this.shared.ping();
      if (await this.handBack()) this.end();
    } catch (err) {
      const now = this.clock.now();
      if (now - this.lastLog >= this.options.logEveryMs) {
        this.lastLog = now;
        this.log.warn(
          `shared fleet state still unavailable after ${Math.round((now - this.degradedSince!) / 1000)} s: ${(err as Error).message}`,
        );
      }
    } finally {
      this.probing = false;
      // After `end`: the decisions that waited go to the shared store; recovery failed, they decide alone.
      const waiting = this.recovery;
      this.recovery = null;
      waiting?.notify();
    }
  }

  /**
   * Recovery has handed back what this node decided alone, and begins its last pass: decisions
   * wait from now until the probe ends (`decide`), so none adds to what that pass hands back.
   */
  recovering(): void {
    this.recovery ??= new Signal();
  }

  /** The shared store took back what this node decided alone: decisions are shared again. */
  private end(): void {
    this.stopProbing();
    const s = Math.round((this.clock.now() - this.degradedSince!) / 1000);
    this.degradedSince = null;
    this.backSince = monotonic(this.clock);
    this.log.info(`shared fleet state is back after ${s} s: decisions are shared again`);
    this.onSharedAgain?.();
    this.shared.onRemoteChange?.();
  }

  stopProbing(): void {
    this.cancelProbe?.();
    this.cancelProbe = null;
  }

  /** Once the probe under way, if any, has ended (its recovery's calls each bounded by a timeout). */
  probeEnded(): Promise<void> {
    return this.probeRun;
  }

  /**
   * A `redis` record change from other state made this store the node's: until the replaced
   * runtime's decisions under way end (`decided`), and for the hold-off after, this node unloads
   * nothing. Kong pushes a configuration to its nodes in turn, so peers may still decide on the
   * old state, where this node cannot see their requests. The 30-minute fault run broke (i) so:
   * 290 ms after a change to another database, an unload under a request a peer still on the old
   * state had just sent (vLLM had it waiting).
   */
  async receiving(decided: Promise<void>): Promise<void> {
    this.recordChanges++;
    try {
      await decided;
    } finally {
      this.recordChanges--;
      this.backSince = monotonic(this.clock);
    }
  }

  /**
   * The shared state was found emptied (or another server answers): unloads are held off as
   * after an outage. Until every node took its leases again and the locks lost are ended or
   * re-begun, another node's load of the same adapter may be under way unseen, answered "already
   * loaded" with its request sent, and the after-load undo, which asks no store, would go under it
   * (the simulation's seed 1012214: 1.1 s after a FLUSHALL). It is back as after an outage too
   * (`onSharedAgain`): a restart from an older snapshot that only a heartbeat saw (no decision
   * failed, no outage ends) may have lost this node's unload ends (the simulation's seed 1534246).
   */
  stateEmptied(): void {
    this.backSince = monotonic(this.clock);
    this.onSharedAgain?.();
  }

  /**
   * Peers hit by the same outage decide alone until their own probe finds the shared store (up
   * to a probe interval after this node did, plus the probe itself): they route to what their
   * polls saw loaded and cannot see this node's unloads. The fault run broke (i) that way: a node
   * back 70 ms unloaded an adapter a peer still deciding alone had just sent a request to.
   */
  unloadHeldOff(): boolean {
    const back = this.backSince;
    if (this.recordChanges > 0) return true;
    // On the monotonic clock: a wall clock stepped ahead 600 ms since shortened the hold by as much.
    return back !== null && monotonic(this.clock) - back < UNLOAD_HOLD_OFF_PROBES * this.options.probeMs;
  }

  /** Closed: a retired runtime's store, which never probes again. */
  get closed(): boolean {
    return this.shut;
  }

  close(): void {
    this.shut = true;
    this.stopProbing();
  }
}
