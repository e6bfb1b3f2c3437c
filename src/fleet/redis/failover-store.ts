import { systemClock, type Clock } from '../../clock';
import type { Logger } from '../../log';
import { MemoryFleetStore } from '../memory-store';
import type { FleetDump, FleetStore, StoreMode } from '../store';
import type {
  AdapterRef,
  Fence,
  FleetEvent,
  Lease,
  Released,
  ReplicaSnapshot,
  ReplicaSpec,
  ReplicaView,
  ResidencyState,
  ResidentAdapter,
} from '../types';

export interface FailoverOptions {
  /** How often a degraded node checks whether the shared store is back. */
  probeMs: number;
  /** While degraded, "still unreachable" is logged at most this often. */
  logEveryMs: number;
}

/** What the shared side must offer besides the store operations: a cheap liveness check. */
export interface SharedStore extends FleetStore {
  ping(): Promise<unknown>;
}

/**
 * Shared fleet state with a local fallback. While the shared store answers, it decides; the
 * local store is fed every observation (polls, upstream outcomes) so it is warm. When a shared
 * call fails or times out, this node decides from its local state until a probe finds the
 * shared store again: requests keep flowing, each bounded by one shared timeout at most.
 *
 * Degraded, a node loads into free slots but never unloads: it cannot see other nodes'
 * requests, and an adapter in flight must never be unloaded. Leases taken locally are
 * re-taken in the shared store on recovery, and releases that failed are replayed.
 */
export class FailoverFleetStore implements FleetStore {
  readonly local = new MemoryFleetStore();
  /** Since when this node decides alone, or null while the shared store answers. */
  private degradedSince: number | null = null;
  private lastLog = 0;
  /** Cancels the next probe while degraded. */
  private cancelProbe: (() => void) | null = null;
  /**
   * Leases this node holds, and where: released in the store that took them. `uncertain`: a
   * local lease whose shared acquire failed without an answer, so it may have run in Redis.
   */
  private readonly mine = new Map<string, { lease: Lease; shared: boolean; uncertain?: boolean }>();
  /** Shared releases that failed: replayed when the shared store returns. */
  private readonly pendingReleases = new Set<string>();

  constructor(
    readonly shared: SharedStore,
    private readonly log: Logger,
    private readonly options: FailoverOptions = { probeMs: 1000, logEveryMs: 30_000 },
    private readonly clock: Clock = systemClock,
  ) {}

  get onRemoteChange(): (() => void) | null {
    return this.shared.onRemoteChange ?? null;
  }

  set onRemoteChange(fn: (() => void) | null) {
    this.shared.onRemoteChange = fn;
  }

  mode(): StoreMode {
    return this.degradedSince === null ? 'redis' : 'local';
  }

  /** Runs `op` on the shared store unless degraded; on failure degrades and runs `fallback`. */
  private async decide<T>(op: (s: SharedStore) => Promise<T>, fallback: () => Promise<T>): Promise<T> {
    if (this.degradedSince !== null) return fallback();
    try {
      return await op(this.shared);
    } catch (err) {
      this.degrade(err as Error);
      return fallback();
    }
  }

  /** Observations go to both: the local store must be warm when it has to decide. */
  private async observe(op: (s: FleetStore) => Promise<void>): Promise<void> {
    await op(this.local);
    if (this.degradedSince !== null) return;
    try {
      await op(this.shared);
    } catch (err) {
      this.degrade(err as Error);
    }
  }

  private degrade(err: Error): void {
    if (this.degradedSince !== null) return;
    this.degradedSince = this.clock.now();
    this.lastLog = this.degradedSince;
    this.log.error(
      `shared fleet state unavailable (${err.message}): this node decides from its own state, loads only into free slots and unloads nothing until it returns`,
    );
    this.scheduleProbe();
  }

  /** The next probe, one `probeMs` after the last one ended, while degraded. */
  private scheduleProbe(): void {
    this.cancelProbe = this.clock.after(this.options.probeMs, () => {
      void this.probe().finally(() => {
        if (this.degradedSince !== null && this.cancelProbe !== null) this.scheduleProbe();
      });
    });
  }

  private probing = false;

  private async probe(): Promise<void> {
    if (this.probing) return;
    this.probing = true;
    try {
      await this.shared.ping();
      await this.recover();
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
    }
  }

  /**
   * Hands this node's leases and missed releases to the shared store, then decides there again.
   * Every open lease is taken again, not only local ones: Redis may have come back empty, and
   * taking a lease it still holds changes nothing (same id).
   */
  private async recover(): Promise<void> {
    try {
      // First the replicas (Redis may have come back empty): leases count only against known ones.
      for (const spec of await this.local.replicaSpecs()) await this.shared.upsertReplica(spec);
      await this.replayReleases();
      await this.restoreLeases(this.shared);
      // Releases that arrived during the hand-over were parked (still degraded): replay them
      // too, until none is left. No await separates the last check from sharing again.
      while (this.pendingReleases.size > 0) await this.replayReleases();
    } catch {
      return; // Not back yet: the next probe tries again.
    }
    this.cancelProbe?.();
    this.cancelProbe = null;
    const s = Math.round((this.clock.now() - this.degradedSince!) / 1000);
    this.degradedSince = null;
    this.log.info(`shared fleet state is back after ${s} s: decisions are shared again`);
    this.shared.onRemoteChange?.();
  }

  private async replayReleases(): Promise<void> {
    for (const id of [...this.pendingReleases]) {
      await this.shared.release(id, this.clock.now());
      this.pendingReleases.delete(id);
    }
  }

  /** Takes every open lease of this node in `shared` (again); local ones move there. */
  private async restoreLeases(shared: SharedStore): Promise<void> {
    for (const [id, m] of [...this.mine]) {
      if (this.mine.get(id) !== m) continue; // ended meanwhile
      await shared.acquire(m.lease);
      // Its request may have ended while the shared copy was being taken.
      if (this.mine.get(id) !== m) {
        await shared.release(id, this.clock.now());
        continue;
      }
      if (m.shared) continue;
      m.shared = true;
      await this.local.release(id, this.clock.now());
    }
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

  views(urls: readonly string[], adapter?: AdapterRef, withResidents?: boolean): Promise<ReplicaView[]> {
    return this.decide(
      async (s) => {
        const views = await s.views(urls, adapter, withResidents);
        if (views.length === urls.length) return views;
        // Redis lost registrations (restarted empty, or flushed): register them again from here,
        // with this node's open leases (a lease it lost would let another node unload under it).
        for (const spec of await this.local.replicaSpecs())
          if (urls.includes(spec.url)) await s.upsertReplica(spec);
        await this.restoreLeases(s);
        return s.views(urls, adapter, withResidents);
      },
      () => this.local.views(urls, adapter, withResidents),
    );
  }

  applySnapshot(url: string, snapshot: ReplicaSnapshot): Promise<void> {
    return this.observe((s) => s.applySnapshot(url, snapshot));
  }

  reportOutcome(url: string, ok: boolean, at: number): Promise<void> {
    return this.observe((s) => s.reportOutcome(url, ok, at));
  }

  residents(url: string): Promise<ResidentAdapter[]> {
    return this.decide(
      (s) => s.residents(url),
      () => this.local.residents(url),
    );
  }

  // Fences from the local store are negative, so a change ends in the store that began it.
  beginLoad(url: string, adapter: string, at: number, limit: number, ttlMs: number): Promise<Fence | null> {
    return this.decide(
      (s) => s.beginLoad(url, adapter, at, limit, ttlMs),
      async () => negate(await this.local.beginLoad(url, adapter, at, limit)),
    );
  }

  async finishLoad(url: string, adapter: string, fence: Fence, ok: boolean, at: number): Promise<boolean> {
    if (fence < 0) return this.local.finishLoad(url, adapter, -fence, ok, at);
    // Shared gone meanwhile: its lock expires there, and polls tell the local store.
    return this.decide(
      (s) => s.finishLoad(url, adapter, fence, ok, at),
      async () => false,
    );
  }

  beginUnload(...args: Parameters<FleetStore['beginUnload']>): Promise<Fence | null> {
    return this.decide(
      (s) => s.beginUnload(...args),
      async () => null,
    );
  }

  finishUnload(url: string, adapter: string, fence: Fence, ok: boolean, at: number): Promise<boolean> {
    return this.decide(
      (s) => s.finishUnload(url, adapter, fence, ok, at),
      async () => false,
    );
  }

  holds(url: string, adapter: string, fence: Fence): Promise<boolean> {
    if (fence < 0) return this.local.holds(url, adapter, -fence);
    return this.decide(
      (s) => s.holds(url, adapter, fence),
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

  claimPlacement(adapter: string, url: string, seen: string | undefined, at: number, ttlMs: number) {
    return this.decide(
      (s) => s.claimPlacement(adapter, url, seen, at, ttlMs),
      () => this.local.claimPlacement(adapter, url, seen, at, ttlMs),
    );
  }

  releasePlacement(adapter: string, url: string): Promise<void> {
    return this.observe((s) => s.releasePlacement(adapter, url));
  }

  async acquire(lease: Lease): Promise<ResidencyState | undefined> {
    let shared = true;
    const tried = this.degradedSince === null;
    const state = await this.decide(
      (s) => s.acquire(lease),
      () => {
        shared = false;
        return this.local.acquire(lease);
      },
    );
    // The shared call failed (a timeout, say): Redis may still run it once it answers again.
    this.mine.set(lease.id, { lease: { ...lease }, shared, uncertain: !shared && tried });
    return state;
  }

  async release(leaseId: string, at: number, status?: number): Promise<Released | undefined> {
    const m = this.mine.get(leaseId);
    this.mine.delete(leaseId);
    if (m && !m.shared) {
      // Released in Redis too when it returns, in case the timed-out acquire ran there.
      if (m.uncertain) this.pendingReleases.add(leaseId);
      return this.local.release(leaseId, at, status);
    }
    // What the upstream said is an observation: the local store learns it too.
    if (m && status !== undefined) await this.local.observeOutcome(m.lease.url, m.lease.adapter, status, at);
    return this.decide(
      (s) => s.release(leaseId, at, status),
      async () => {
        // Its count stays in the shared store until it returns: replay the release then.
        if (m) this.pendingReleases.add(leaseId);
        return m ? { ...m.lease, adapterIdle: true } : undefined;
      },
    );
  }

  async expireLeases(now: number, maxAgeMs: number): Promise<Lease[]> {
    for (const [id, m] of this.mine) if (now - m.lease.at >= maxAgeMs) this.mine.delete(id);
    const local = await this.local.expireLeases(now, maxAgeMs);
    const shared = await this.decide(
      (s) => s.expireLeases(now, maxAgeMs),
      async () => [],
    );
    return [...local, ...shared];
  }

  async openLeases(): Promise<Lease[]> {
    return [...this.mine.values()].map((m) => ({ ...m.lease }));
  }

  inFlightTotal(): Promise<number> {
    return this.decide(
      (s) => s.inFlightTotal(),
      () => this.local.inFlightTotal(),
    );
  }

  spendBudget(key: string, limit: number, windowMs: number, at: number): Promise<number> {
    return this.decide(
      (s) => s.spendBudget(key, limit, windowMs, at),
      () => this.local.spendBudget(key, limit, windowMs, at),
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

  async close(): Promise<void> {
    this.cancelProbe?.();
    this.cancelProbe = null;
    await this.shared.close?.();
  }
}

function negate(fence: Fence | null): Fence | null {
  return fence === null ? null : -fence;
}
