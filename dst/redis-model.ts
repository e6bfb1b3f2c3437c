/**
 * The modelled Redis under the real failover store: one server (the in-memory store, which
 * test/core/store-differential.test.ts keeps equal to the Lua scripts on a real redis-server,
 * plus what the scripts add around it: the epoch, the `reborn` grace, heartbeats and the live
 * node count, each node's lease list for `prune`, lock expiry of silent nodes, pub/sub), and per
 * node a link implementing SharedStore (what RedisFleetStore offers the failover store) through
 * the fault layer: partition (calls never arrive, the caller times out), slow replies (the call
 * runs at the server, the reply comes too late; the replies after it wait for it, as on one TCP
 * stream: `RedisLink.toServer`), a restart empty or from an older snapshot, a
 * FLUSHALL and a Sentinel switch (a new server run id, said once to the next call as
 * ServerSwitched, as src/fleet/redis/connection.ts does). The scripts read Redis's clock: every
 * time a call carries is replaced by the server's (true time), as the differential test runs them.
 */
import type { Clock } from '../src/clock';
import type { RedisConfig } from '../src/config/redis-schema';
import { LEASE_CEILING } from '../src/fleet/memory-leases';
import { MemoryFleetStore } from '../src/fleet/memory-store';
import { ServerSwitched } from '../src/fleet/redis/connection';
import type { SharedStore } from '../src/fleet/redis/shared-store';
import type { BudgetTaken, BudgetWindow, FleetDump, FleetStore, LoadEnd } from '../src/fleet/store';
import {
  pollDuration,
  type AdapterRef,
  type Fence,
  type FleetEvent,
  type Lease,
  type Released,
  type ReplicaSnapshot,
  type ReplicaSpec,
  type ReplicaView,
  type ResidencyState,
  type ResidentAdapter,
} from '../src/fleet/types';
import type { Random } from '../src/random';
import { nextNodeCount, NO_COUNT, type NodeCount } from '../src/fleet/redis/live-nodes';
import type { StoreCall } from './health-reads';
import { trip, type Scheduler } from './scheduler';
import type { UnloadLock } from './registry-loss';

/** The Lua snapshot script's margin for a poll without a shared start (scripts/residency.ts). */
const SKEW_MARGIN_MS = 50;
/** The memory store's per-replica counts (private to it): which adapters its leases keep busy. */
type BusyCounts = {
  replicas: Map<string, { inFlightByAdapter: Map<string, number>; gone: Map<string, number> }>;
};

/** One mutating call as the server applied it: replayed to rebuild an older snapshot. */
type Op = { name: string; args: unknown[]; seq: number };

/**
 * A cold-load budget call as the server ran it (its time), for the checks: a spend granted or
 * refused (with the ms left of its window), spends a node adds (counted alone, or before an
 * emptied store), units given back to their window (a prefetch's, no load followed), or a slot claimed for a load (`beginLoad`, any answer; `alone`: its call failed
 * on the link and the node claimed in its local store). `request`: the request whose decision
 * made the call, if any; `delivered`: its answer reached the caller in time.
 */
export type BudgetOp =
  | { op: 'spend'; at: number; key: string; waitMs: number; request?: number; delivered: boolean }
  | { op: 'add'; at: number; key: string; count: number }
  /**
   * Units given back to the window they were granted in (no load followed them); `lost`: the state
   * lost the write since (a Sentinel switch, a restart from an older snapshot), the units stay spent.
   */
  | { op: 'refund'; at: number; key: string; count: number; lost?: true }
  | { op: 'claim'; at: number; request?: number; alone?: true };

/**
 * A load or unload lock as the server held it, for the checks: granted, then ended (by its holder,
 * expired, or lost with the state). `seq` orders it among every script either server ran
 * (`ScriptOrder`): two in the same ms are told apart, as the store saw them.
 */
export interface LockLife {
  at: number;
  seq: number;
  /** Server time and order of its end (undefined: still held). */
  endedAt?: number;
  endSeq?: number;
  /**
   * A make-room unload its holder ended done: until when the store keeps the room it made for its
   * adapter (`at` of the end + the unload's TTL), which holds a free slot against another adapter's
   * make-room unload until that adapter's load begins (MemoryFleetStore.beginUnload, `held`).
   */
  roomUntil?: number;
}

/** The order of the scripts both servers ran (one counter for both databases). */
export type ScriptOrder = { n: number };

/** The server's state: rebuilt from the op log for a restart from a snapshot. */
class ServerState {
  store = new MemoryFleetStore();
  epoch: string | null = null;
  /** When the epoch was set (server time): the live-node count is whole only node_ttl_ms after. */
  epochAt = 0;
  rebornUntil = -Infinity;
  /** node -> last heartbeat (server time). */
  nodes = new Map<string, number>();
  /** Open lease id -> its node (the scripts' `nl:<node>` sets). */
  leaseNode = new Map<string, string>();
  /** Load and unload locks: fence -> holder and expiry. */
  locks = new Map<
    Fence,
    { node: string; url: string; adapter: string; until: number; op: 'load' | 'unload' }
  >();
  fence = 0;
}

export class RedisModel {
  private s = new ServerState();
  private log: Op[] = [];
  /** Op-log lengths at the snapshots taken (RDB saves), oldest first. */
  private snapshots: number[] = [];
  runId = 1;
  /** Down (restarting): calls are refused. */
  down = false;
  private readonly links: RedisLink[] = [];
  private candidates = 0;
  private replaying = false;
  /** While replaying: the order of the script first run for the op replayed (`Op.seq`). */
  private replayingSeq: number | null = null;
  /** Times the state was emptied (FLUSHALL, empty or snapshot restart): one budget more each. */
  readonly resets: number[] = [];
  /** Of `resets`: the times the state came back from an older copy (a snapshot, a replica that missed writes). */
  readonly restores: number[] = [];
  /**
   * Budget calls and slot claims in the order the server ran them (a rebuild does not repeat them),
   * not the order their answers came: a script awaiting more steps of the model answers after one
   * begun later (seed 2219256: an add of 2 ran before a refused spend and was told after it).
   */
  readonly budget: BudgetOp[] = [];
  /** By entry of `budget`: the order of the script that made it (`ScriptOrder`). */
  private readonly budgetSeq: number[] = [];
  /** Polls that brought a replica's registry into the state, oldest first: which replica, when applied, when begun. */
  readonly registryReads: { url: string; at: number; startedAt: number }[] = [];
  /** Replicas a retain call forgot (server time, and the node whose call it was), for the checks (dst/forget-check.ts). */
  readonly forgotten: { at: number; url: string; node: string; leased?: true }[] = [];
  /** The server's state now (the forget check audits what it keeps of a replica). */
  get state(): { store: MemoryFleetStore; locks: ReadonlyMap<Fence, { url: string }> } {
    return this.s;
  }
  /** By node id: when it last registered a replica here (server time), for the checks. */
  readonly registeredAt = new Map<string, number>();
  /** By fence: the locks granted (a rebuild does not repeat them), each ended when the server ended it. */
  private readonly lives = new Map<Fence, LockLife>();
  /** Unload locks granted (a rebuild does not repeat them), by fence: where, their life, whether ended done. */
  private readonly unloadLives = new Map<
    Fence,
    { url: string; adapter: string; life: LockLife; done?: boolean }
  >();
  /** By fence: the TTL a make-room unload (not a trim) was granted with, for its room's `roomUntil`. */
  private readonly roomTtls = new Map<Fence, number>();
  /**
   * By node id: the latest server time of a call whose reply told the node its state was lost (an
   * emptied state found, or another server answering) while it decided with this state, for the
   * checks: it then takes its leases again (FailoverFleetStore's `onStateLost`). Found while it
   * decides alone, it waits for its probe to recover.
   */
  readonly foundLostAt = new Map<string, number>();
  /** By lease id: the server time its last acquire here ran (a retake too), for the checks (`leaseLost`). */
  readonly leaseTakenAt = new Map<string, number>();
  /** By lease id: the server time the expiry reclaimed it by age (`lease_max_age_ms` unrenewed), for the busy check. */
  readonly expiredAt = new Map<string, number>();
  /** Lease id -> its replica and adapter as taken (read for the ids still open). */
  private readonly leaseWhere = new Map<string, { url: string; adapter: string | null }>();
  /** Node ids that left this state (a retired runtime's last prune), acknowledged: a rebuild does not undo it. */
  private readonly left = new Set<string>();
  /**
   * Leases a rebuild brought back under a node id that had left: nobody's to drop, they age out
   * as a dead node's (docs/reliability.md, "A release Redis acknowledged and then lost").
   */
  private readonly revived = new Set<string>();

  constructor(
    readonly clock: Scheduler,
    readonly config: RedisConfig,
    private readonly random: Random,
    private readonly order: ScriptOrder = { n: 0 },
  ) {}

  /** The life of the lock granted with `fence` (undefined: none granted outside a rebuild). */
  lockLife(fence: Fence): LockLife | undefined {
    return this.lives.get(fence);
  }

  /** The unload locks granted, as the server held them: where, when granted and ended, whether done. */
  unloadLocks(): UnloadLock[] {
    return [...this.unloadLives.values()].map(({ url, adapter, life, done }) => ({
      url,
      adapter,
      at: life.at,
      ...(life.endedAt === undefined ? {} : { endedAt: life.endedAt }),
      ...(done ? { done } : {}),
    }));
  }

  /** The order number of the script run last (`run` takes it as the script begins). */
  get lastScript(): number {
    return this.order.n;
  }

  /** Records `op` in `budget` at the place of the script `seq` (default: the last run). */
  record(op: BudgetOp, seq = this.order.n): void {
    let k = this.budget.length;
    while (k > 0 && this.budgetSeq[k - 1]! > seq) k--;
    this.budget.splice(k, 0, op);
    this.budgetSeq.splice(k, 0, seq);
  }

  /** Ends the lock granted with `fence`, if its life is known and open (`seq`: the script that ended it). */
  private endLock(fence: Fence, seq = ++this.order.n, at = this.clock.now()): void {
    const l = this.lives.get(fence);
    if (l && l.endSeq === undefined) {
      l.endedAt = at;
      l.endSeq = seq;
    }
  }

  /** The state is lost (emptied, or rebuilt from an older copy): every lock granted in it ends. */
  private endLocks(): void {
    for (const fence of this.lives.keys()) this.endLock(fence);
  }

  /**
   * A registration's epoch candidate, never handed out twice, as the script's 64 random bits. Not
   * per link: a runtime replaced on the same state has a new link with the same node id, and a
   * candidate counted per link repeated the epoch its predecessor had set before a FLUSHALL, so the
   * nodes that knew it never learned the state was emptied (seed 150271).
   */
  epochCandidate(node: string): string {
    return `${node}.${this.candidates++}`;
  }

  link(node: string, nodeClock: Clock): RedisLink {
    const l = new RedisLink(this, node, nodeClock, this.random);
    this.links.push(l);
    return l;
  }

  get epoch(): string | null {
    return this.s.epoch;
  }

  /** Open leases as the server holds them (lease id -> node), but those left to age (`revived`). */
  /** The adapters on `url` that the open leases of `nodes` hold (the lease ids' nodes). */
  adaptersLeasedBy(url: string, nodes: ReadonlySet<string>): string[] {
    const out: string[] = [];
    for (const [id, node] of this.s.leaseNode) {
      const l = this.leaseWhere.get(id);
      if (nodes.has(node) && l?.url === url && l.adapter !== null) out.push(l.adapter);
    }
    return out;
  }

  /** Whether the state holds lease `id` now (taken, taken again, or brought back by a rebuild; not ended). */
  holdsLease(id: string): boolean {
    return this.s.leaseNode.has(id);
  }

  openLeases(): ReadonlyMap<string, string> {
    return new Map([...this.s.leaseNode].filter(([id]) => !this.revived.has(id)));
  }

  /**
   * The scripts' `livenodes()` at server time `now`: the ZCARD of `nodes` (every node heartbeating,
   * until `expire` finds it silent) and the epoch's age (0: no epoch yet).
   */
  liveNodes(now: number): [number, number] {
    return [this.s.nodes.size, this.s.epoch === null ? 0 : Math.max(0, now - this.s.epochAt)];
  }

  /**
   * Whether the lock under `fence` is another node's than `node` ('' any): the scripts' `othernodes`
   * (src/fleet/redis/scripts/prelude.ts), which refuse a node's end or check of such a lock.
   */
  othersLock(fence: Fence, node: string | undefined): boolean {
    if (!node) return false;
    const l = this.s.locks.get(fence);
    return l !== undefined && l.node !== node;
  }

  get store(): MemoryFleetStore {
    return this.s.store;
  }

  takeSnapshot(): void {
    this.snapshots.push(this.log.length);
    if (this.snapshots.length > 8) this.snapshots.shift();
  }

  flushAll(): void {
    this.endLocks();
    this.s = new ServerState();
    this.log = [];
    this.snapshots = [];
    this.resets.push(this.clock.now());
  }

  /** A restart: down for `downMs`, back empty or from the oldest snapshot kept (`fromSnapshot`). */
  restart(downMs: number, fromSnapshot: boolean): void {
    this.down = true;
    this.runId++;
    const keep = fromSnapshot ? (this.snapshots[0] ?? 0) : 0;
    if (keep > 0) this.restores.push(this.clock.now());
    const run = this.runId;
    this.clock.after(downMs, () => {
      // Sentinel promoted a replica meanwhile: the old primary comes back as its replica (it
      // takes the new primary's data), not as the primary with its snapshot (dst seed 394).
      if (this.runId !== run) return;
      void this.rebuild(keep).then(() => {
        this.down = false;
      });
    });
    this.resets.push(this.clock.now());
  }

  /** A Sentinel switch: the replica promoted missed the last `lost` writes. */
  switchPrimary(lost: number): void {
    this.runId++;
    this.down = true;
    void this.rebuild(Math.max(0, this.log.length - lost)).then(() => (this.down = false));
    if (lost > 0) this.resets.push(this.clock.now());
    if (lost > 0) this.restores.push(this.clock.now());
  }

  private async rebuild(keep: number): Promise<void> {
    const ops = this.log.slice(0, keep);
    // A refund the copy lacks is undone: its units count in the window again (seed 2228354).
    const dropped = new Set(this.log.slice(keep).map((op) => op.seq));
    this.budget.forEach((op, k) => {
      if (op.op === 'refund' && dropped.has(this.budgetSeq[k]!)) op.lost = true;
    });
    this.s = new ServerState();
    this.log = [];
    this.snapshots = [];
    // The ops were published when first applied: a replica catching up publishes nothing.
    this.replaying = true;
    try {
      for (const op of ops) {
        // Replayed under its first order, so a later rebuild that drops it again finds its record.
        this.replayingSeq = op.seq;
        await this.apply(op.name, op.args);
      }
    } finally {
      this.replaying = false;
      this.replayingSeq = null;
    }
    // The locks the copy lacks end with the state; one whose grant it has lives on (dst seed 662665:
    // a switch that lost no write kept bio's load lock, and the store counted it for 2 s after).
    for (const fence of this.lives.keys()) if (!this.s.locks.has(fence)) this.endLock(fence);
    for (const [id, node] of this.s.leaseNode) if (this.left.has(node)) this.revived.add(id);
  }

  /**
   * Runs one script atomically at the server (true time); logs it for snapshots; publishes
   * "room may have freed" where the script calls `changed()` (src/fleet/redis/scripts): a
   * finished load or unload whose fence was current, an adapter's busy count reaching 0 (a lease
   * released, expired or pruned), a lock of a silent node or past its expiry ended on its
   * adapter, a prune that dropped a lease. Never for an acquire.
   */
  async apply(name: string, args: unknown[]): Promise<unknown> {
    const watched = name === 'release' || name === 'expireLeases' || name === 'prune';
    const busyBefore = watched ? this.busyAdapters() : null;
    const c = { changed: 0 };
    const r = await this.run(name, args, c);
    const snap = name === 'applySnapshot' ? (args[1] as ReplicaSnapshot) : undefined;
    if (snap?.registry !== undefined)
      this.registryReads.push({
        url: args[0] as string,
        at: this.clock.now(),
        startedAt: snap.startedAt ?? snap.at,
      });
    let published = c.changed;
    if (busyBefore) {
      const now = this.busyAdapters();
      for (const k of busyBefore) if (!now.has(k)) published++;
    }
    if (!this.replaying) for (let i = 0; i < published; i++) this.publish();
    return r;
  }

  /** Ends a load lock as the script's `endlock` does: the entry dropped, the adapter not marked gone. */
  private async forgetLoad(url: string, adapter: string, fence: Fence, now: number): Promise<boolean> {
    const r = (this.s.store as unknown as BusyCounts).replicas.get(url);
    const gone = r?.gone.get(adapter);
    const ended = await this.s.store.finishLoad(url, adapter, fence, false, now);
    if (ended && r) {
      if (gone === undefined) r.gone.delete(adapter);
      else r.gone.set(adapter, gone);
    }
    return ended;
  }

  /** Replica and adapter pairs with a lease counted on them (the scripts' `busy:<url>` hashes). */
  private busyAdapters(): Set<string> {
    const out = new Set<string>();
    for (const [url, r] of (this.s.store as unknown as BusyCounts).replicas)
      for (const [adapter, n] of r.inFlightByAdapter) if (n > 0) out.add(`${url}\u0000${adapter}`);
    return out;
  }

  /** One script's effect on the state; `c.changed`: its `changed()` calls but those of busy counts reaching 0. */
  private async run(name: string, args: unknown[], c: { changed: number }): Promise<unknown> {
    const s = this.s;
    // Called at once by `apply`: the order the scripts run in, each script's state change made
    // before its first await (the store's methods change it synchronously).
    const seq = ++this.order.n;
    this.log.push({ name, args, seq: this.replayingSeq ?? seq });
    const st = s.store as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>;
    switch (name) {
      case 'upsert': {
        const [spec, grace, candidate, at, node] = args as [ReplicaSpec, number, string, number, string?];
        if (s.epoch === null) {
          s.epoch = candidate;
          s.epochAt = at;
          if (grace > 0) s.rebornUntil = at + grace;
        }
        // The script's claim: the registering node's, at server time.
        await s.store.upsertReplica(spec, node ?? '', at);
        return s.epoch;
      }
      case 'retainReplicas': {
        // As the script (scripts/forgetting.ts): claims lapse past node_ttl_ms after their node's last
        // claim or heartbeat (`nodes`), and a lock named by the url keeps it (the `lock` hash).
        const [urls, graceMs, at, node] = args as [string[], number, number, string];
        // The replicas an open lease is on as the model counts them (each acquire, retake, release,
        // expiry and prune), apart from the store's own lease table that the script's guard reads.
        const leased = new Set([...s.leaseNode.keys()].map((id) => this.leaseWhere.get(id)?.url));
        const out = await s.store.retainReplicas(urls, graceMs, {
          at,
          node,
          nodeTtlMs: this.config.node_ttl_ms,
          heartbeat: (n) => s.nodes.get(n),
          locked: (url) => [...s.locks.values()].some((l) => l.url === url),
        });
        if (!this.replaying)
          for (const url of out)
            this.forgotten.push({
              at: this.clock.now(),
              url,
              node,
              ...(leased.has(url) ? { leased: true } : {}),
            });
        return out;
      }
      case 'heartbeat': {
        const [node, at] = args as [string, number];
        s.nodes.set(node, at);
        return [s.epoch, this.liveNodes(at)];
      }
      case 'acquire': {
        const lease = args[0] as Lease;
        const node = args[1] as string;
        this.revived.delete(lease.id);
        const r = await s.store.acquire(lease);
        s.leaseNode.set(lease.id, node);
        this.leaseWhere.set(lease.id, { url: lease.url, adapter: lease.adapter });
        this.leaseTakenAt.set(lease.id, lease.at);
        return r;
      }
      case 'retake': {
        // As the script: each lease as `acquire` takes it, those the expiry reclaimed refused.
        const [leases, node] = args as [Lease[], string];
        const refused = await s.store.retake(leases);
        for (const lease of leases)
          if (!refused.includes(lease.id)) {
            this.revived.delete(lease.id);
            s.leaseNode.set(lease.id, node);
            this.leaseWhere.set(lease.id, { url: lease.url, adapter: lease.adapter });
            this.leaseTakenAt.set(lease.id, lease.at);
          }
        return refused;
      }
      case 'release': {
        const r = (await s.store.release(
          args[0] as string,
          args[1] as number,
          args[2] as number | undefined,
        )) as Released | undefined;
        s.leaseNode.delete(args[0] as string);
        return r;
      }
      case 'expireLeases': {
        const [now, maxAge, nodeTtl] = args as [number, number, number];
        // As the script: the locks of nodes found silent now (in `nodes`, heartbeat older than
        // nodeTtl), not of a node merely absent from it, as each is after a FLUSHALL until its
        // next heartbeat (dst seed 10: a load lock taken then ended, a second load granted).
        const silent = new Set<string>();
        for (const [node, at] of [...s.nodes])
          if (at <= now - nodeTtl) {
            s.nodes.delete(node);
            silent.add(node);
            // Its claims lapse, as the script's `dropclaims` (scripts/forgetting.ts).
            s.store.nodeGone(node, now, at, nodeTtl);
          }
        for (const [fence, l] of [...s.locks])
          if (l.until <= now || silent.has(l.node)) {
            s.locks.delete(fence);
            this.endLock(fence, undefined, now);
            // endlock: changed() once the lock still held its adapter. A load is forgotten
            // (`dropres`), not marked gone as a failed load's end marks it: a poll begun before the
            // expiry that lists the adapter adopts it, as in Redis.
            const ended =
              l.op === 'load'
                ? await this.forgetLoad(l.url, l.adapter, fence, now)
                : await s.store.finishUnload(l.url, l.adapter, fence, false, now);
            if (ended) c.changed++;
          }
        const out = await s.store.expireLeases(now, maxAge);
        for (const l of out) {
          s.leaseNode.delete(l.id);
          if (!this.replaying) this.expiredAt.set(l.id, now);
        }
        return out;
      }
      case 'prune': {
        const [node, held, leaving, at] = args as [string, string[], boolean, number];
        const keep = new Set(held);
        let n = 0;
        for (const [id, owner] of [...s.leaseNode])
          if (owner === node && !keep.has(id)) {
            s.leaseNode.delete(id);
            if (await s.store.release(id, at)) n++;
          }
        if (leaving) {
          s.nodes.delete(node);
          s.store.nodeGone(node, at);
          if (!this.replaying) this.left.add(node);
        }
        if (n > 0) c.changed++;
        return n;
      }
      case 'beginLoad':
      case 'beginUnload': {
        const [url, adapter, at, ttl, node] = args as [string, string, number, number, string];
        if (name === 'beginUnload' && at < s.rebornUntil) return null;
        const f =
          name === 'beginLoad'
            ? await s.store.beginLoad(url, adapter, at, args[5] as number)
            : await s.store.beginUnload(
                url,
                adapter,
                at,
                ttl,
                args[5] as string | undefined,
                args[6] as number | undefined,
              );
        if (f !== null && !this.replaying) {
          const life = { at: this.clock.now(), seq };
          this.lives.set(f, life);
          if (name === 'beginUnload') this.unloadLives.set(f, { url, adapter, life });
        }
        const forName = args[5];
        if (
          f !== null &&
          name === 'beginUnload' &&
          typeof forName === 'string' &&
          forName !== '' &&
          !forName.startsWith('\u0000')
        )
          this.roomTtls.set(f, ttl);
        // As the script's `lock`: a holder absent from the node set enters it (seed 3142528), so one
        // that dies before its first heartbeat to an emptied state is found silent.
        if (f !== null && node && !s.nodes.has(node)) s.nodes.set(node, at);
        if (f !== null)
          s.locks.set(f, {
            node,
            url,
            adapter,
            until: at + ttl,
            op: name === 'beginLoad' ? 'load' : 'unload',
          });
        return f;
      }
      case 'finishLoad':
      case 'finishUnload': {
        const [url, adapter, fence, ok, at, node] = args as [string, string, Fence, LoadEnd, number, string?];
        // Another node's lock under this fence (handed out again by a server that lost this one's): refused.
        if (this.othersLock(fence, node)) return false;
        const r = await st[name]!.call(s.store, url, adapter, fence, ok, at);
        if (r === true) {
          s.locks.delete(fence);
          const life = this.lives.get(fence);
          const ttl = this.roomTtls.get(fence);
          this.roomTtls.delete(fence);
          if (name === 'finishUnload' && ok === true && life && ttl !== undefined) life.roomUntil = at + ttl;
          const unloaded = name === 'finishUnload' ? this.unloadLives.get(fence) : undefined;
          if (unloaded && unloaded.life.endSeq === undefined) unloaded.done = ok === true;
          this.endLock(fence, seq);
          c.changed++;
        }
        return r;
      }
      case 'addToBudget': {
        // The budget script's window, counted `count` times more (scripts/budget.ts budgetAdd), in one
        // step as its INCRBY: every unit counted before the first await, so no script runs between
        // two of them (seed 2219256: a spend ran between the first and the second of two units added).
        const [key, count, windowMs, at] = args as [string, number, number, number];
        const units: Promise<number>[] = [];
        for (let i = 0; i < count; i++)
          units.push(s.store.spendBudget(key, Number.MAX_SAFE_INTEGER, windowMs, at));
        await Promise.all(units);
        return null;
      }
      default:
        return st[name]!.apply(s.store, args);
    }
  }

  /** Pub/sub: every link that hears the server is told, a tick later. */
  publish(): void {
    for (const l of this.links) l.hear();
  }
}

/**
 * One direction of a stream: messages pass in the order they entered it, each no earlier than its
 * own time came (`enter` at sending, the returned function called when its trip ends, with what
 * it does there, or nothing: lost). A message whose trip ended early waits for those before it
 * and then passes in the same instant, just after them: no draw, no timer of its own.
 */
export class InOrder {
  private readonly line: { arrived: boolean; then?: () => void }[] = [];
  private passing = false;

  enter(): (then?: () => void) => void {
    const m: { arrived: boolean; then?: () => void } = { arrived: false };
    this.line.push(m);
    return (then) => {
      m.arrived = true;
      if (then) m.then = then;
      this.pass();
    };
  }

  private pass(): void {
    if (this.passing) return; // a message passing lets others arrive: the loop below takes them
    this.passing = true;
    try {
      while (this.line[0]?.arrived) this.line.shift()!.then?.();
    } finally {
      this.passing = false;
    }
  }
}

/** What one call does on the link: how late its request and reply are, or whether it is lost. */
export interface LinkFaults {
  /** Partitioned: calls never reach the server and time out; pub/sub is silent. */
  partitioned: boolean;
  /** Extra ms before the reply (a slow server or link); past the timeout, the call ran anyway. */
  slowMs: number;
}

/**
 * One node's connection to the modelled Redis: RedisFleetStore's face (SharedStore) over the
 * fault layer. Calls are bounded by the record's `timeout` on the node's clock.
 */
export class RedisLink implements SharedStore {
  faults: LinkFaults = { partitioned: false, slowMs: 0 };
  onRemoteChange: (() => void) | null = null;
  onStateLost: (() => void) | null = null;
  get liveNodes(): number | null {
    return this.nodeCount.nodes;
  }
  private count: NodeCount = NO_COUNT;
  get nodeCount(): NodeCount {
    return this.count;
  }
  /** The request whose decision makes a call now (read when the call is made), for `RedisModel.budget`. */
  request: () => number | undefined = () => undefined;
  /** Told of each call a request's decision made once its reply came (dst/health-reads.ts). */
  answered: ((c: StoreCall) => void) | null = null;
  /**
   * Told of a load slot as the server grants it (the script run), before its answer reaches the
   * node: the store counts it from then, an unload it grants next included (seed 2223196), and until
   * its TTL or until the node is found silent if the answer never comes (its call timed out, its
   * stream closed or its process died: seed 885877). A timed-out script still runs, as in Redis:
   * ioredis's `commandTimeout` only rejects the caller's promise (lib/Command.ts `setTimeout`, tag
   * v5.11.1: `this.reject(new Error("Command timed out"))`), the command already written stays in
   * `commandQueue` and Redis runs it.
   */
  grantRan: ((url: string, adapter: string, fence: Fence, ttlMs: number) => void) | null = null;
  /** Whether the node decides with this state now (not alone), for `RedisModel.foundLostAt`. */
  sharing: () => boolean = () => true;
  private epochSeen: string | null = null;
  private stateLost = false;
  private runIdSeen: number | null = null;
  /**
   * Calls the server ran whose reply has not come back (all on the server last reached). One connection
   * (RedisConnection) is one TCP stream: it reaches another server only once the old stream has
   * closed, and ioredis then fails what that stream still owed (`maxRetriesPerRequest: 0`). A
   * reply from the old server never comes after a call the new one answered (seed 140805).
   */
  private readonly unanswered = new Map<number, () => void>();
  /**
   * The stream's two directions, each in order as one TCP connection keeps it: ioredis writes every
   * command on the client's one stream (lib/Redis.ts `sendCommand`: `stream.write`, then
   * `commandQueue.push`; commands sent before it connects wait in `offlineQueue`, written in order
   * by lib/redis/event_handler.ts `readyHandler`), Redis runs one connection's commands in the order
   * they arrive, and ioredis takes each reply as the answer of the oldest command written
   * (lib/DataHandler.ts `returnReply` -> `shiftCommand`: `commandQueue.shift()`), all at tag v5.11.1,
   * the version package.json pins. A call whose drawn trip ends before the trip of the call sent
   * before it runs just after that one, and a reply likewise waits for the one before it: the draws
   * are the same as before, only their order is kept (seed 500849: node 0's end of a claim, sent
   * first, ran after its own unload).
   */
  private readonly toServer = new InOrder();
  private fromServer = new InOrder();
  private nextCall = 0;
  private closed = false;
  private listening = true;
  private cancelHeartbeat: (() => void) | null = null;

  constructor(
    private readonly server: RedisModel,
    readonly node: string,
    private readonly clock: Clock,
    private readonly random: Random,
  ) {
    this.heartbeat();
  }

  /** The life of a lock the server granted (what the checks read; no call, no fault). */
  lockLife(fence: Fence): LockLife | undefined {
    return this.server.lockLife(fence);
  }

  get currentEpoch(): string | null {
    return this.epochSeen;
  }

  /** As RedisFleetStore's. */
  inheritEpoch(epoch: string | null): void {
    this.epochSeen ??= epoch;
  }

  /** As RedisFleetStore's. */
  inheritNodeCount(count: NodeCount): void {
    if (this.count.nodes === null) this.count = count;
  }

  takeStateLost(): boolean {
    const lost = this.stateLost;
    this.stateLost = false;
    return lost;
  }

  /** A published change reaches this node (its subscriber), unless cut off. */
  hear(): void {
    if (this.closed || !this.listening || this.faults.partitioned) return;
    this.clock.after(1, () => this.onRemoteChange?.());
  }

  private heartbeat(): void {
    if (this.closed) return;
    let ranAt: number | undefined;
    this.call('heartbeat', [this.node, 0], { at: [1], ran: (now) => (ranAt = now) })
      .then((r) => {
        const [epoch, nodes] = r as [string | null, [number, number]];
        this.noteNodes(nodes);
        if (this.noteEpoch(epoch, ranAt)) this.onStateLost?.();
      })
      .catch((err: unknown) => {
        if (err instanceof ServerSwitched) {
          this.found(this.server.clock.now());
          this.stateLost = true;
          this.onStateLost?.();
        }
      });
    this.cancelHeartbeat = this.clock.after(Math.max(100, this.server.config.node_ttl_ms / 4), () =>
      this.heartbeat(),
    );
  }

  /** As RedisFleetStore's `noteNodes` (src/fleet/redis/live-nodes.ts). */
  private noteNodes([nodes, epochAgeMs]: [number, number]): void {
    this.count = nextNodeCount(this.count, nodes, epochAgeMs, this.server.config.node_ttl_ms);
  }

  /** `ranAt`: when the server ran the call that answered `epoch` (server time). */
  private noteEpoch(epoch: string | null, ranAt?: number): boolean {
    const lost = epoch === null || (this.epochSeen !== null && epoch !== this.epochSeen);
    if (epoch !== null) this.epochSeen = epoch;
    if (lost) this.stateLost = true;
    if (lost && ranAt !== undefined) this.found(ranAt);
    return lost;
  }

  /** The node found its state lost by a call the server ran at `at`, deciding with it (`RedisModel.foundLostAt`). */
  private found(at: number): void {
    if (!this.sharing()) return;
    this.server.foundLostAt.set(this.node, Math.max(at, this.server.foundLostAt.get(this.node) ?? -Infinity));
  }

  /**
   * One script call through the fault layer. `at`: argument positions that carry a time (the
   * server's clock replaces them, as the scripts read TIME). `recovering`: the probe's ping,
   * which takes a changed server without reporting it.
   */
  private call(
    name: string,
    args: unknown[],
    o: {
      at?: number[];
      recovering?: boolean;
      pure?: (server: RedisModel) => unknown;
      /** Told when the server ran it (its time), its answer and its order (`ScriptOrder`). */
      ran?: (now: number, r: unknown, seq: number) => void;
    } = {},
  ): Promise<unknown> {
    const server = this.server;
    const timeoutMs = server.config.timeout;
    const request = this.request();
    return new Promise((resolve, reject) => {
      let settled = false;
      const id = this.nextCall++;
      const settle = (fn: () => void) => {
        if (settled) return;
        settled = true;
        this.unanswered.delete(id);
        cancelTimeout();
        fn();
      };
      const cancelTimeout = this.clock.after(timeoutMs, () =>
        settle(() => reject(new Error(`Command timed out (${name})`))),
      );
      if (this.closed) return settle(() => reject(new Error('Connection is closed.')));
      if (this.faults.partitioned) return; // blackholed: the timeout answers
      const slow = this.faults.slowMs;
      const arrived = this.toServer.enter();
      // A call the timeout gave up on still arrives and runs (`grantRan`).
      trip(this.clock, this.random, () =>
        arrived(() => {
          if (server.down) return settle(() => reject(new Error('connect ECONNREFUSED')));
          if (this.faults.partitioned) return;
          if (this.runIdSeen !== null && this.runIdSeen !== server.runId) {
            this.runIdSeen = server.runId;
            for (const fail of [...this.unanswered.values()]) fail();
            // The old stream closed: none of the replies it owed comes, so none holds a later one back.
            this.fromServer = new InOrder();
            if (!o.recovering)
              return settle(() => reject(new ServerSwitched('another Redis server answers')));
          }
          this.runIdSeen = server.runId;
          const now = server.clock.now();
          const real = args.slice();
          for (const i of o.at ?? []) real[i] = now;
          const run = o.pure ? Promise.resolve(o.pure(server)) : server.apply(name, real);
          // `run` took its order as it began, synchronously.
          const seq = server.lastScript;
          this.unanswered.set(id, () => settle(() => reject(new Error('Connection is closed.'))));
          const replied = this.fromServer.enter();
          void run.then(
            (r) => {
              o.ran?.(now, r, seq);
              const answer = () => {
                if (request !== undefined) this.answered?.({ request, name, at: now, lateMs: slow });
                resolve(r);
              };
              const back = () => trip(this.clock, this.random, () => replied(() => settle(answer)));
              if (slow > 0) this.clock.after(slow, back);
              else back();
            },
            (err: Error) => replied(() => settle(() => reject(err))),
          );
        }),
      );
    });
  }

  ping(): Promise<unknown> {
    return this.call('ping', [], { recovering: true, pure: () => 'PONG' });
  }

  async upsertReplica(spec: ReplicaSpec): Promise<void> {
    const grace = this.epochSeen !== null ? this.server.config.node_ttl_ms : 0;
    let ranAt: number | undefined;
    const epoch = (await this.call(
      'upsert',
      [spec, grace, this.server.epochCandidate(this.node), 0, this.node],
      {
        at: [3],
        ran: (now) => this.server.registeredAt.set(this.node, (ranAt = now)),
      },
    )) as string;
    this.noteEpoch(epoch, ranAt);
  }

  async retainReplicas(urls: readonly string[], graceMs: number): Promise<string[]> {
    return (await this.call('retainReplicas', [[...urls], graceMs, 0, this.node], { at: [2] })) as string[];
  }

  async replicaSpecs(): Promise<ReplicaSpec[]> {
    return (await this.call('replicaSpecs', [], { pure: (s) => s.store.replicaSpecs() })) as ReplicaSpec[];
  }

  async views(
    urls: readonly string[],
    adapter?: AdapterRef,
    withResidents?: boolean,
  ): Promise<ReplicaView[]> {
    let ranAt: number | undefined;
    const r = (await this.call('views', [], {
      pure: async (s) => ({
        // This node's leases counted apart, as the script counts them for the node it names.
        views: await s.store.views(urls, adapter, withResidents, this.node),
        epoch: s.epoch,
        nodes: s.liveNodes(s.clock.now()),
      }),
      ran: (now) => (ranAt = now),
    })) as { views: ReplicaView[]; epoch: string | null; nodes: [number, number] };
    this.noteNodes(r.nodes);
    this.noteEpoch(r.epoch, ranAt);
    return r.views;
  }

  async applySnapshot(url: string, snap: ReplicaSnapshot): Promise<void> {
    const now = this.server.clock.now();
    // As the Lua script: the poll's start on Redis's clock, from the shared read before it or estimated.
    const startedAt = snap.startedOnArrival
      ? now
      : (snap.sharedStartedAt ?? now - pollDuration(snap) - SKEW_MARGIN_MS);
    // The node's monotonic readings mean nothing at the server (as the script keeps none).
    const { managed, monoStartedAt: _ms, monoAt: _ma, ...rest } = snap;
    const registry = snap.registry?.map((e) => ({ ...e }));
    const isManaged = managed
      ? (() => {
          const m = new Map(snap.registry?.map((e) => [e.name, managed(e.name, e.path)]) ?? []);
          return (name: string) => m.get(name) ?? false;
        })()
      : undefined;
    await this.call('applySnapshot', [
      url,
      {
        ...rest,
        registry,
        startedAt,
        at: now,
        ...(isManaged ? { managed: (name: string) => isManaged(name) } : {}),
      },
    ]);
  }

  async reportOutcome(url: string, ok: boolean, at: number): Promise<void> {
    await this.call('reportOutcome', [url, ok, at], { at: [2] });
  }

  /** As the script, the leases' ages by the server's clock (the caller's `at` means nothing there). */
  async residents(url: string, at?: number): Promise<ResidentAdapter[]> {
    return (await this.call('residents', [], {
      pure: (s) => s.store.residents(url, at === undefined ? undefined : s.clock.now()),
    })) as ResidentAdapter[];
  }

  async beginLoad(
    url: string,
    adapter: string,
    at: number,
    limit: number,
    ttlMs: number,
  ): Promise<Fence | null> {
    const request = this.request();
    const claim = (now: number, alone?: true, seq?: number) =>
      this.server.record(
        {
          op: 'claim',
          at: now,
          ...(request === undefined ? {} : { request }),
          ...(alone ? { alone } : {}),
        },
        seq,
      );
    try {
      return (await this.call('beginLoad', [url, adapter, at, ttlMs, this.node, limit], {
        at: [2],
        ran: (now, r, seq) => {
          claim(now, undefined, seq);
          const granted = r as Fence | null;
          if (granted !== null) this.grantRan?.(url, adapter, granted, ttlMs);
        },
      })) as Fence | null;
    } catch (err) {
      // The call failed on the link (a switch, a timeout, refused): the failover store claims in its
      // local store instead, deciding alone, and that is a claim too (seed 531770).
      claim(this.server.clock.now(), true);
      throw err;
    }
  }

  // `own`: only this node's lock under `fence`, as RedisFleetStore's (the scripts' `othernodes`).
  async finishLoad(
    url: string,
    adapter: string,
    fence: Fence,
    ok: LoadEnd,
    at: number,
    own = false,
  ): Promise<boolean> {
    const node = own ? this.node : '';
    return (await this.call('finishLoad', [url, adapter, fence, ok, at, node], { at: [4] })) as boolean;
  }

  async beginUnload(
    url: string,
    adapter: string,
    at: number,
    ttlMs: number,
    forAdapter?: string,
    limit?: number,
  ): Promise<Fence | null> {
    return (await this.call('beginUnload', [url, adapter, at, ttlMs, this.node, forAdapter, limit], {
      at: [2],
    })) as Fence | null;
  }

  async finishUnload(
    url: string,
    adapter: string,
    fence: Fence,
    ok: boolean,
    at: number,
    own = false,
  ): Promise<boolean> {
    const node = own ? this.node : '';
    return (await this.call('finishUnload', [url, adapter, fence, ok, at, node], { at: [4] })) as boolean;
  }

  async holds(url: string, adapter: string, fence: Fence, own = false): Promise<boolean> {
    const node = own ? this.node : '';
    return (await this.call('holds', [], {
      pure: (s) => !s.othersLock(fence, node) && s.store.holds(url, adapter, fence),
    })) as boolean;
  }

  async forget(url: string, adapter: string, at: number): Promise<void> {
    await this.call('forget', [url, adapter, at], { at: [2] });
  }

  async touch(url: string, adapter: string, at: number): Promise<void> {
    await this.call('touch', [url, adapter, at], { at: [2] });
  }

  async claimPlacement(...args: Parameters<FleetStore['claimPlacement']>) {
    return (await this.call('claimPlacement', args, { at: [3] })) as string;
  }

  async releasePlacement(adapter: string, url: string, claimer?: string): Promise<void> {
    await this.call('releasePlacement', [adapter, url, claimer]);
  }

  async acquire(lease: Lease): Promise<ResidencyState | undefined> {
    // Aged on Redis's clock: the lease's `at` is the server's.
    const r = await this.call('acquire', [], {
      pure: (s) => s.apply('acquire', [{ ...lease, at: s.clock.now() }, this.node]),
    });
    return r as ResidencyState | undefined;
  }

  /** As RedisFleetStore's: one script for the batch, each lease aged on Redis's clock as `acquire`'s. */
  async retake(leases: readonly Lease[]): Promise<string[]> {
    if (leases.length === 0) return [];
    return (await this.call('retake', [], {
      pure: (s) => s.apply('retake', [leases.map((l) => ({ ...l, at: s.clock.now() })), this.node]),
    })) as string[];
  }

  async release(leaseId: string, at: number, status?: number): Promise<Released | undefined> {
    return (await this.call('release', [leaseId, at, status], { at: [1] })) as Released | undefined;
  }

  async expireLeases(now: number, maxAgeMs: number): Promise<Lease[]> {
    return (await this.call('expireLeases', [now, maxAgeMs, this.server.config.node_ttl_ms, LEASE_CEILING], {
      at: [0],
    })) as Lease[];
  }

  async inFlightTotal(): Promise<number> {
    return (await this.call('inFlightTotal', [], { pure: (s) => s.store.inFlightTotal() })) as number;
  }

  async spendBudget(key: string, limit: number, windowMs: number, at: number): Promise<number> {
    return (await this.takeBudget(key, limit, windowMs, at)).waitMs;
  }

  async takeBudget(key: string, limit: number, windowMs: number, at: number): Promise<BudgetTaken> {
    const request = this.request();
    const ran: { op?: Extract<BudgetOp, { op: 'spend' }> } = {};
    const taken = (await this.call('takeBudget', [key, limit, windowMs, at], {
      at: [3],
      ran: (now, r, seq) => {
        ran.op = { op: 'spend', at: now, key, waitMs: (r as BudgetTaken).waitMs, delivered: false };
        if (request !== undefined) ran.op.request = request;
        this.server.record(ran.op, seq);
      },
    })) as BudgetTaken;
    // The server may run a call whose answer comes after the caller gave up (a slow reply).
    if (ran.op) ran.op.delivered = true;
    return taken;
  }

  async refundBudget(window: BudgetWindow, count: number, at: number): Promise<number> {
    return (await this.call('refundBudget', [window, count, at], {
      at: [2],
      ran: (now, r, seq) => {
        if ((r as number) > 0)
          this.server.record({ op: 'refund', at: now, key: window.key, count: r as number }, seq);
      },
    })) as number;
  }

  async addToBudget(key: string, count: number, windowMs: number): Promise<void> {
    await this.call('addToBudget', [key, count, windowMs, 0], {
      at: [3],
      ran: (now, _r, seq) => this.server.record({ op: 'add', at: now, key, count }, seq),
    });
  }

  async pushEvent(e: FleetEvent): Promise<void> {
    await this.call('pushEvent', [e]);
  }

  async events(limit: number): Promise<FleetEvent[]> {
    return (await this.call('events', [], { pure: (s) => s.store.events(limit) })) as FleetEvent[];
  }

  async dump(): Promise<FleetDump> {
    return (await this.call('dump', [], { pure: (s) => s.store.dump() })) as FleetDump;
  }

  async sharedTime(): Promise<number> {
    return (await this.call('time', [], { pure: (s) => s.clock.now() })) as number;
  }

  async prune(held: () => string[], leaving = false): Promise<number> {
    // `held` is read when the script runs (RedisFleetStore reads it once connected, just before sending).
    return (await this.call('prune', [], {
      pure: (s) => s.apply('prune', [this.node, held(), leaving, s.clock.now()]),
    })) as number;
  }

  mode(): 'redis' {
    return 'redis';
  }

  unsubscribe(): void {
    this.listening = false;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.cancelHeartbeat?.();
  }
}

export type { FleetStore };
