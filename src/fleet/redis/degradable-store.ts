/**
 * Which store decides each operation of a failover store, and what a node deciding alone may do:
 * decisions go to the shared store while it answers, observations (polls, upstream outcomes) go
 * to both so the local store is warm, and degraded a node loads into free slots but never
 * unloads (it cannot see other nodes' requests, and an adapter in flight must never be
 * unloaded). Fences from the local store are negative, so a change ends in the store that began
 * it. Leases, the budget and recovery are the subclass's (recovering-store.ts, failover-store.ts).
 */
import type { Clock } from '../../clock';
import type { Logger } from '../../log';
import { MemoryFleetStore } from '../memory-store';
import type { FleetDump, FleetStore, LoadEnd, StoreMode } from '../store';
import type { Fence, FleetEvent, ReplicaSnapshot, ReplicaSpec, ResidentAdapter } from '../types';
import { Outage, type FailoverOptions } from './outage';
import type { SharedStore } from './shared-store';

export abstract class DegradableFleetStore {
  readonly local: MemoryFleetStore;
  protected readonly outage: Outage;

  constructor(
    readonly shared: SharedStore,
    protected readonly log: Logger,
    options: FailoverOptions,
    protected readonly clock: Clock,
  ) {
    // On this node's clock: its claims and their grace (`retainReplicas`). Its views count this
    // node's leases apart (`ownInFlight`), as the shared store's do.
    this.local = new MemoryFleetStore(clock, shared.node);
    this.outage = new Outage(shared, log, options, clock, () => this.recover());
  }

  /**
   * Hands what this node decided alone to the shared store, after a probe found it answering;
   * true once all of it is there (decisions are shared again).
   */
  protected abstract recover(): Promise<boolean>;

  get onRemoteChange(): (() => void) | null {
    return this.shared.onRemoteChange ?? null;
  }

  set onRemoteChange(fn: (() => void) | null) {
    this.shared.onRemoteChange = fn;
  }

  get onSharedAgain(): (() => void) | null {
    return this.outage.onSharedAgain;
  }

  set onSharedAgain(fn: (() => void) | null) {
    this.outage.onSharedAgain = fn;
  }

  mode(): StoreMode {
    return this.outage.degraded ? 'local' : 'redis';
  }

  /** Whether unloads are held off now (a record change from other state, the shared store just back). */
  unloadsHeldOff(): boolean {
    return this.outage.unloadHeldOff();
  }

  undoHeldOff(fence: Fence): boolean {
    return this.unloadsHeldOff() || (fence < 0 && !this.outage.degraded);
  }

  /** Runs `op` on the shared store unless degraded; on failure degrades and runs `fallback`. */
  protected decide<T>(op: (s: SharedStore) => Promise<T>, fallback: () => Promise<T>): Promise<T> {
    return this.outage.decide(op, fallback);
  }

  /** Observations go to both: the local store must be warm when it has to decide. */
  protected async observe(op: (s: FleetStore) => Promise<void>): Promise<void> {
    await op(this.local);
    if (this.outage.degraded) return;
    try {
      await op(this.shared);
    } catch (err) {
      this.degrade(err as Error);
    }
  }

  protected degrade(err: Error): void {
    this.outage.degrade(err);
  }

  sharedTime(): Promise<number | undefined> {
    return this.decide(
      async (s) => s.sharedTime?.(),
      async () => undefined,
    );
  }

  upsertReplica(spec: ReplicaSpec): Promise<void> {
    return this.observe((s) => s.upsertReplica(spec));
  }

  replicaSpecs(): Promise<ReplicaSpec[]> {
    return this.decide(
      (s) => s.replicaSpecs(),
      () => this.local.replicaSpecs(),
    );
  }

  /**
   * The local copy forgets by the same rule, its claims this node's alone: a replica forgotten there
   * is not registered again after an outage (`registerReplicas`), one this node still routes to is
   * kept. The shared store's answer, or the local copy's while deciding alone.
   */
  async retainReplicas(urls: readonly string[], graceMs: number): Promise<string[]> {
    const alone = await this.local.retainReplicas(this.routedTo(urls), graceMs);
    return this.decide(
      (s) => s.retainReplicas(urls, graceMs),
      async () => alone,
    );
  }

  /**
   * What the local copy is told this node routes to: `urls`, and those its open leases are on
   * (recovering-store.ts): a shared lease is not in the local copy, and a replica it forgot is not
   * registered again, so that lease, taken again after an emptied state, would count nowhere.
   */
  protected routedTo(urls: readonly string[]): readonly string[] {
    return urls;
  }

  localReplicaSpecs(): Promise<ReplicaSpec[]> {
    return this.local.replicaSpecs();
  }

  applySnapshot(url: string, snapshot: ReplicaSnapshot): Promise<void> {
    return this.observe((s) => s.applySnapshot(url, snapshot));
  }

  reportOutcome(url: string, ok: boolean, at: number): Promise<void> {
    return this.observe((s) => s.reportOutcome(url, ok, at));
  }

  residents(url: string, at?: number): Promise<ResidentAdapter[]> {
    return this.decide(
      (s) => s.residents(url, at),
      () => this.local.residents(url, at),
    );
  }

  // Fences from the local store are negative, so a change ends in the store that began it.
  beginLoad(url: string, adapter: string, at: number, limit: number, ttlMs: number): Promise<Fence | null> {
    return this.decide(
      (s) => s.beginLoad(url, adapter, at, limit, ttlMs),
      async () => negate(await this.local.beginLoad(url, adapter, at, limit)),
    );
  }

  async finishLoad(url: string, adapter: string, fence: Fence, ok: LoadEnd, at: number): Promise<boolean> {
    if (fence < 0) return this.local.finishLoad(url, adapter, -fence, ok, at);
    // Shared gone meanwhile: its lock expires there, and polls tell the local store. Only this
    // node's lock: the server may have handed the fence out again (shared-store.ts).
    return this.decide(
      (s) => s.finishLoad(url, adapter, fence, ok, at, true),
      async () => false,
    );
  }

  beginUnload(...args: Parameters<FleetStore['beginUnload']>): Promise<Fence | null> {
    if (this.unloadsHeldOff()) return Promise.resolve(null);
    return this.decide(
      // Asked again: one that waited for a recovery's end (`Outage.decide`) begins in its hold-off.
      (s) => (this.unloadsHeldOff() ? Promise.resolve(null) : s.beginUnload(...args)),
      async () => null,
    );
  }

  finishUnload(url: string, adapter: string, fence: Fence, ok: boolean, at: number): Promise<boolean> {
    return this.decide(
      (s) => s.finishUnload(url, adapter, fence, ok, at, true),
      async () => false,
    );
  }

  holds(url: string, adapter: string, fence: Fence): Promise<boolean> {
    if (fence < 0) return this.local.holds(url, adapter, -fence);
    return this.decide(
      (s) => s.holds(url, adapter, fence, true),
      async () => false,
    );
  }

  forget(url: string, adapter: string, at: number): Promise<void> {
    return this.observe((s) => s.forget(url, adapter, at));
  }

  touch(url: string, adapter: string, at: number): Promise<void> {
    return this.decide(
      (s) => s.touch(url, adapter, at),
      () => this.local.touch(url, adapter, at),
    );
  }

  claimPlacement(...args: Parameters<FleetStore['claimPlacement']>) {
    return this.decide(
      (s) => s.claimPlacement(...args),
      () => this.local.claimPlacement(...args),
    );
  }

  releasePlacement(adapter: string, url: string, claimer?: string): Promise<void> {
    return this.observe((s) => s.releasePlacement(adapter, url, claimer));
  }

  inFlightTotal(): Promise<number> {
    return this.decide(
      (s) => s.inFlightTotal(),
      () => this.local.inFlightTotal(),
    );
  }

  pushEvent(event: FleetEvent): Promise<void> {
    return this.observe((s) => s.pushEvent(event));
  }

  events(limit: number): Promise<FleetEvent[]> {
    return this.decide(
      (s) => s.events(limit),
      () => this.local.events(limit),
    );
  }

  dump(): Promise<FleetDump> {
    return this.decide(
      (s) => s.dump(),
      () => this.local.dump(),
    );
  }
}

function negate(fence: Fence | null): Fence | null {
  return fence === null ? null : -fence;
}
