import { monotonic, systemClock, type Clock } from '../clock';
import { HolderIndex } from './holder-index';
import { Lru } from '../lru';
import { MemoryLeases } from './memory-leases';
import { ReplicaClaims } from './replica-claims';
import {
  dropResidency,
  markGone,
  newReplicaRecord,
  putResidency,
  replicaView,
  residentsOf,
  type ReplicaRecord,
} from './replica-record';
import {
  RETAKE_BATCH,
  type BudgetTaken,
  type BudgetWindow,
  type FleetDump,
  type FleetStore,
  type LoadEnd,
} from './store';
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
} from './types';
import { leaseNode, nextFence } from './types';

/** Upstream failures in a row (from the proxy path) that mark a replica down until a poll succeeds. */
export const PASSIVE_FAILURE_LIMIT = 3;
const EVENT_LIMIT = 200;
/** The node an in-process store's claims are this process's (one node: no Redis). */
export const LOCAL_NODE = 'local';
/** Replicas one `retainReplicas` call looks at for forgetting at most (as the Redis script: one call never runs long). */
export const FORGET_BATCH = 100;

/**
 * What a shared store's caller passes that an in-process store takes from itself (the modelled
 * Redis of the simulation passes each, as the script reads them: its node, Redis time, node_ttl_ms).
 */
export interface RetainOptions {
  /** When (default: the store's clock). */
  at?: number;
  /** Whose claims (default: LOCAL_NODE). */
  node?: string;
  /** A claim lapses this long after its node's last claim or heartbeat (default: never: one node). */
  nodeTtlMs?: number;
  /** A node's last heartbeat (the scripts' `nodes` zset), if any. */
  heartbeat?: (node: string) => number | undefined;
  /** Whether a load or unload lock names the url (the scripts' `lock` hash), besides the residency's. */
  locked?: (url: string) => boolean;
}

/**
 * The fleet state in this process's memory: one per plugin-server process, shared by every
 * plugin instance and every nginx worker of a Kong node. Async only to match the interface.
 */
export class MemoryFleetStore implements FleetStore {
  private replicas = new Map<string, ReplicaRecord>();
  /** Each URL list asked about, its records (`recordsOf`); begun anew when a replica is forgotten. */
  private byList = new WeakMap<readonly string[], ReplicaRecord[]>();
  /** Every replica's residency by adapter: one lookup a decision (views). */
  private readonly holders = new HolderIndex();
  /** Open leases, counted in their replicas' in-flight figures (their ages on the process's clock). */
  private leases = new MemoryLeases(
    (url) => this.replicas.get(url),
    () => this.mono(),
  );
  private eventLog: FleetEvent[] = [];
  private lastFence = 0;
  /** Budget windows by key (consumers are many: least recently used out first). */
  private budgets = new Lru<string, { opened: number; ends: number; used: number }>(10_000);
  /** Placements of cold adapters not yet resident, by adapter, with the requests sharing each. */
  private placements = new Map<string, { url: string; until: number; claimers: Set<string> }>();
  /**
   * Per replica, the adapters an ended unload made room for, until their load begins (or the
   * unload's lock TTL passes): another node making room for the same adapter waits instead of
   * unloading a second one (one unload per load).
   */
  private roomMade = new Map<string, Map<string, number>>();
  /** The lock TTL of each unload under way (`url\0adapter`), for the room it makes. */
  private unloadTtls = new Map<string, number>();
  /** Which nodes route to each replica: one no node claims is forgotten after a grace (`retainReplicas`). */
  private readonly claims = new ReplicaClaims();

  /** When a registration or a retain claims, unless its caller says (`RetainOptions`). */
  private readonly claimsClock: Clock;
  /**
   * The clock of the process whose store this is, when handed one (a node's own store, its local
   * copy): its loads and unloads are stamped on its monotonic line too, as its polls are
   * (`monoStartedAt`). Not handed one (a store shared by nodes, as the simulation's Redis), none.
   */
  private readonly ownClock: Clock | undefined;

  /**
   * `node`: the node whose store this is (its lease prefix), whose leases each view counts apart
   * (`ownInFlight`); none (a store shared by nodes, as the simulation's Redis): each read names it.
   */
  constructor(
    clock?: Clock,
    readonly node?: string,
  ) {
    this.claimsClock = clock ?? systemClock;
    this.ownClock = clock;
  }

  /** Now on the process's monotonic clock, for a residency change's stamp (none without one). */
  private mono(): number | undefined {
    return this.ownClock === undefined ? undefined : monotonic(this.ownClock);
  }

  /**
   * Also claims the replica for `node` (a registration then a list must not forget what was just
   * registered); `node` '' claims nothing, as a node of an older version registers.
   */
  async upsertReplica(spec: ReplicaSpec, node = LOCAL_NODE, at = this.claimsClock.now()): Promise<void> {
    const r = this.replicas.get(spec.url);
    if (r) r.spec = { ...spec };
    else this.replicas.set(spec.url, newReplicaRecord(spec, this.holders));
    if (node !== '') this.claims.claim(spec.url, node, at);
  }

  /**
   * Registers each replica this process claims in `from` (it routes to it, as last told) and this
   * store does not know, with its spec and claim there. Not one `from` keeps unclaimed (this process
   * left it: kept until its forget check), which a claim here would make a replica to register again
   * (a reclaim), nor one known here already (a newer registration: its spec kept). Synchronous: no
   * registration lands between a check and its write (FailoverFleetStore `succeed`).
   */
  knowReplicasOf(from: MemoryFleetStore): void {
    for (const [url, r] of from.replicas) {
      const at = from.claims.claimedAt(url, LOCAL_NODE);
      if (at === undefined || this.replicas.has(url)) continue;
      this.replicas.set(url, newReplicaRecord(r.spec, this.holders));
      this.claims.claim(url, LOCAL_NODE, at);
    }
  }

  /** As the Redis script (scripts/forgetting.ts `retain`), its node, time and node TTL from `o`. */
  async retainReplicas(urls: readonly string[], graceMs: number, o: RetainOptions = {}): Promise<string[]> {
    const at = o.at ?? this.claimsClock.now();
    const node = o.node ?? LOCAL_NODE;
    const listed = new Set(urls);
    const known = (url: string) => this.replicas.has(url);
    for (const url of listed) if (known(url)) this.claims.claim(url, node, at);
    this.claims.dropUnlisted(node, listed, at, known);
    const ttl = o.nodeTtlMs ?? Infinity;
    const forgotten: string[] = [];
    for (const url of this.claims.unclaimed(at, graceMs, ttl, FORGET_BATCH, known, o.heartbeat)) {
      const r = this.replicas.get(url)!;
      if (this.idle(url, r) && !o.locked?.(url)) {
        this.forgetReplica(url, r, at);
        forgotten.push(url);
      }
    }
    return forgotten;
  }

  /**
   * Whether `node` (default: this process) routes to `url` as last told: a registration claims it,
   * a retain not listing it drops the claim at once, though the replica stays for the grace.
   */
  claimedBy(url: string, node = LOCAL_NODE): boolean {
    return this.claims.claimedBy(url, node);
  }

  /**
   * The modelled Redis's `expire` (node `node` silent past `nodeTtlMs`, its last heartbeat
   * `lastBeat`) and `prune` of a node leaving the state (no heartbeat: it routed there until `at`):
   * all its claims go, as the scripts' `dropclaims` (scripts/forgetting.ts; the ttl decides
   * nothing here any more: the modelled link still passes it).
   */
  nodeGone(node: string, at: number, lastBeat?: number, _nodeTtlMs?: number): void {
    this.claims.dropNode(node, at, (url) => this.replicas.has(url), lastBeat);
  }

  /**
   * Nothing runs on the replica: no in-flight count, no lease (counted or not), no load or unload
   * under way. Forgotten under one, a fresh record could adopt the adapter with no count and grant
   * its unload under a request.
   */
  private idle(url: string, r: ReplicaRecord): boolean {
    if (r.inFlight !== 0) return false;
    for (const e of r.residency.values()) if (e.state === 'loading' || e.state === 'unloading') return false;
    return !this.leases.holdsOn(url);
  }

  /** Every record of the replica goes: its spec and figures, residency, gone marks, rooms, claims. */
  private forgetReplica(url: string, r: ReplicaRecord, at: number): void {
    for (const name of [...r.residency.names()]) dropResidency(r, name);
    this.replicas.delete(url);
    this.byList = new WeakMap();
    this.roomMade.delete(url);
    for (const k of this.unloadTtls.keys()) if (k.startsWith(`${url}\u0000`)) this.unloadTtls.delete(k);
    this.claims.drop(url);
    this.event({ at, url, adapter: '', op: 'replica-forgotten', result: 'ok', detail: FORGOTTEN_DETAIL });
  }

  async replicaSpecs(): Promise<ReplicaSpec[]> {
    return [...this.replicas.values()].map((r) => ({ ...r.spec }));
  }

  /** `node`: the node reading them (default: the store's), whose leases `ownInFlight` counts. */
  async views(
    urls: readonly string[],
    adapter?: AdapterRef,
    withResidents = false,
    node = this.node,
  ): Promise<ReplicaView[]> {
    return this.readViews(urls, adapter, withResidents, node);
  }

  /**
   * The replicas this store has seen down (a failed poll, or upstream failures in a row), each as
   * a failed poll begun when its newest poll here began and ended `now`: what a node that decided
   * alone owes the shared store (recovering-store.ts), which keeps it only if no poll it applied
   * began later.
   */
  seenDown(now: number): { url: string; snapshot: ReplicaSnapshot }[] {
    const down: { url: string; snapshot: ReplicaSnapshot }[] = [];
    for (const [url, r] of this.replicas)
      if (r.health === 'down' && r.checkedAt !== null)
        down.push({ url, snapshot: { at: now, ...pollStart(r), ok: false, error: r.lastError } });
    return down;
  }

  /**
   * The replicas this store has polled up, each as an up verdict (no figures) begun when its
   * newest poll here began: a node back from deciding alone hands them on too, or the shared
   * store kept a down it heard before the node was cut off (dst seed 503368).
   */
  seenUp(now: number): { url: string; snapshot: ReplicaSnapshot }[] {
    const up: { url: string; snapshot: ReplicaSnapshot }[] = [];
    for (const [url, r] of this.replicas)
      if (r.health === 'up' && r.checkedAt !== null)
        up.push({ url, snapshot: { at: now, ...pollStart(r), ok: true, verdictOnly: true } });
    return up;
  }

  /**
   * The views, then the lease, with nothing between (no await): the Redis script's twin. The views
   * are the lease's node's (`ownInFlight`), as the script reads them.
   */
  async viewsAndLease(
    urls: readonly string[],
    adapter: AdapterRef | undefined,
    lease: Lease,
  ): Promise<{ views: ReplicaView[]; state: ResidencyState | undefined }> {
    const views = this.readViews(urls, adapter, false, leaseNode(lease.id));
    return { views, state: this.acquireHere(lease) };
  }

  /** `views` in the call (FleetStore.viewsNow): the request path's, which then awaits nothing. */
  viewsNow(urls: readonly string[], adapter?: AdapterRef, withResidents = false): ReplicaView[] {
    return this.readViews(urls, adapter, withResidents, this.node);
  }

  private readViews(
    urls: readonly string[],
    adapter: AdapterRef | undefined,
    withResidents: boolean,
    node: string | undefined,
  ) {
    const out: ReplicaView[] = [];
    const mark = adapter ? this.holders.mark(adapter.name) : undefined;
    for (const r of this.recordsOf(urls)) {
      const v = replicaView(r, adapter, mark, node);
      if (withResidents) v.residents = residentsOf(r);
      out.push(v);
    }
    if (adapter) this.showPlacement(out, adapter.name);
    return out;
  }

  /**
   * The records of `urls`, in order: a router asks with the same list on every request, and a
   * lookup by URL per replica per request is a good part of a decision at 64 replicas. Records
   * are never replaced, and a forgotten one empties the cache (`forgetReplica`), so a list's
   * records stay right while its URLs do (checked: a caller may change its array in place).
   */
  private recordsOf(urls: readonly string[]): ReplicaRecord[] {
    const hit = this.byList.get(urls);
    if (hit !== undefined && sameUrls(hit, urls)) return hit;
    const records: ReplicaRecord[] = [];
    for (const url of urls) {
      const r = this.replicas.get(url);
      if (r) records.push(r);
    }
    // A list naming a replica not registered yet is read afresh until it is.
    if (records.length === urls.length) this.byList.set(urls, records);
    return records;
  }

  /** A cold adapter's placement shows as a loading holder on its replica (a slot spoken for). */
  private showPlacement(views: ReplicaView[], adapter: string): void {
    const p = this.placements.get(adapter);
    if (!p) return;
    const v = views.find((x) => x.url === p.url);
    if (!v || v.adapter || v.backend !== 'vllm') return;
    v.adapter = { state: 'loading', lastUsed: 0, inFlight: 0, placed: true };
    v.residentCount++;
  }

  async applySnapshot(url: string, s: ReplicaSnapshot): Promise<void> {
    const r = this.replicas.get(url);
    if (!r) return;
    const startedAt = s.startedAt ?? s.at;
    if (begunBefore(s, startedAt, r)) return;
    if (s.verdictOnly && s.ok) {
      // The health only: the verdict read nothing here, so the record claims no poll (no start, no
      // check): a router polls a record no poll read before routing on it, and a poll begun before
      // the verdict still brings its registry (dst seed 705202).
      r.verdictAt = Math.max(r.verdictAt, startedAt);
      this.markUp(r, url, s.at);
      return;
    }
    // Begun before a poll that found the replica up: older news.
    if (!s.ok && startedAt < r.verdictAt) return;
    r.scrapedAt = startedAt;
    r.scrapedMonoAt = s.monoStartedAt;
    r.checkedAt = s.at;
    if (!s.ok) {
      if (r.health !== 'down')
        this.event({ at: s.at, url, adapter: '', op: 'replica-down', result: 'error', detail: s.error });
      r.health = 'down';
      r.lastError = s.error;
      return;
    }
    this.markUp(r, url, s.at);
    r.snapshotAt = s.at;
    if (s.load) {
      // Base-model leases are no adapter's: any request running or waiting there renews them (the residency script's).
      const busy = s.load.running + s.load.waiting > 0;
      if (busy || s.load.activeAdapters.length > 0) this.leases.renew(url, s.load.activeAdapters, s.at, busy);
      r.waiting = s.load.waiting;
      r.running = s.load.running;
      r.kvUsage = s.load.kvUsage;
    }
    if (s.llamaAdapters) r.llamaAdapters = s.llamaAdapters.map((a) => ({ ...a }));
    if (s.registry) {
      // A configuration registered since the last look: static entries may be managed now.
      const recheck = s.managedVersion !== undefined && s.managedVersion !== r.classifiedUnder;
      r.classifiedUnder = s.managedVersion;
      this.reconcile(r, s.registry, s.at, startedAt, s.managed, recheck, {
        started: s.monoStartedAt,
        at: s.monoAt,
      });
    }
  }

  private markUp(r: ReplicaRecord, url: string, at: number): void {
    if (r.health === 'down') this.event({ at, url, adapter: '', op: 'replica-up', result: 'ok' });
    r.health = 'up';
    r.lastError = undefined;
    r.passiveFailures = 0;
  }

  /** The replica's registry is the truth: adopt what appeared, forget what vanished. */
  private reconcile(
    r: ReplicaRecord,
    registry: { name: string; path: string }[],
    at: number,
    scrapedAt: number,
    managed?: (name: string, path: string) => boolean,
    recheck = false,
    mono: { started?: number; at?: number } = {},
  ): void {
    // Changed here at or after the poll began: newer than the registry it read. On the monotonic
    // clock where the change and the poll both said (this process's): a step of the wall clock
    // back between them dated the change before the poll (a load ended read as vanished, an
    // unload's gone mark read as older than the list that still named it).
    const newer = (wall: number, stamp: number | undefined) =>
      stamp !== undefined && mono.started !== undefined ? stamp >= mono.started : wall >= scrapedAt;
    const present = new Set(registry.map((e) => e.name));
    let vanished = 0;
    for (const name of r.residency.names()) {
      const slot = r.residency.slotOf(name)!;
      const state = r.residency.stateAt(slot);
      // Missing from a registry read before this entry changed: the registry is the older truth. A
      // load or unload under way is ended by its holder (an unload's end makes the room it was for:
      // dropped here first, the next unload for that adapter was granted too); an unload's end then
      // leaves it gone, even one ended not done (its holder cut off, its lock expired).
      if (present.has(name) || state === 'loading') continue;
      if (newer(r.residency.sinceAt(slot), r.sinceMono.get(name))) continue;
      if (state === 'unloading') {
        r.missedUnloading.add(name);
        continue;
      }
      // Gone: unloaded (ours finished, or someone else's), or the replica restarted.
      if (state === 'loaded') vanished++;
      dropResidency(r, name);
    }
    for (const { name, path } of registry) {
      const cur = r.residency.get(name);
      // Classified before the configuration that manages it registered: a router's load after all.
      if (recheck && cur?.state === 'static' && managed?.(name, path)) {
        putResidency(r, name, { ...cur, state: 'loaded' }, r.sinceMono.get(name));
        continue;
      }
      if (cur || newer(r.gone.get(name) ?? -Infinity, r.goneMono.get(name))) continue;
      // A router's load (ours before a restart, or another instance's) if a configuration
      // manages the name or we loaded here before; otherwise registered at replica start. Before
      // the first read, only the names loaded count: another's load says nothing of the start-up
      // ones (an emptied state: a load sent before the first poll re-adopted the registry). A name
      // listed at a path no configuration loads is a start-up one whatever was loaded here (answered
      // "already loaded"; seed 310213: a failed load of that very name had set everLoaded).
      // As residency.ts's Lua: managed wins either way; unknown, ours if loaded here.
      const manages = managed?.(name, path);
      const ours = manages ?? (r.everLoaded || r.loadedUnseen.has(name));
      const state = ours ? 'loaded' : 'static';
      putResidency(r, name, { state, since: at, lastUsed: at }, mono.at);
    }
    if (!r.registrySeen) {
      r.registrySeen = true;
      r.everLoaded ||= r.loadedUnseen.size > 0;
      r.loadedUnseen.clear();
    }
    if (vanished > 0) {
      this.event({
        at,
        url: r.spec.url,
        adapter: '',
        op: 'replica-restart',
        result: 'ok',
        detail: `${vanished} loaded adapter(s) left the registry`,
      });
    }
  }

  async reportOutcome(url: string, ok: boolean, at: number): Promise<void> {
    this.passiveOutcome(url, ok, at);
  }

  /** Passive health: an upstream answer, ok or a failure that counts towards down. */
  private passiveOutcome(url: string, ok: boolean, at: number): void {
    const r = this.replicas.get(url);
    if (!r) return;
    if (ok) {
      r.passiveFailures = 0;
      return;
    }
    r.passiveFailures++;
    if (r.passiveFailures === PASSIVE_FAILURE_LIMIT && r.health !== 'down') {
      r.health = 'down';
      r.lastError = `${PASSIVE_FAILURE_LIMIT} upstream failures in a row`;
      this.event({ at, url, adapter: '', op: 'replica-down', result: 'error', detail: r.lastError });
    }
  }

  /**
   * An upstream answer: passive health only. A 404 forgets nothing here: it may be a client's
   * mistyped path, so the router re-reads the replica's registry (router/log-phase.ts
   * `releaseLease`: Poller.refreshUrl afresh).
   */
  async observeOutcome(url: string, _adapter: string | null, status: number, at: number): Promise<void> {
    await this.reportOutcome(url, status < 500, at);
  }

  async residents(url: string, at?: number): Promise<ResidentAdapter[]> {
    const r = this.replicas.get(url);
    if (!r) return [];
    return residentsOf(r, at === undefined ? undefined : this.leases.heldFor(url, at));
  }

  async beginLoad(url: string, adapter: string, at: number, limit: number): Promise<Fence | null> {
    const r = this.replicas.get(url);
    if (!r || r.residency.has(adapter) || r.residentCount >= limit) return null;
    // Its load begins: the room made for it is taken. A load refused keeps it (the slot another load
    // took may come back if that load fails).
    this.roomMade.get(url)?.delete(adapter);
    const fence = (this.lastFence = nextFence(this.lastFence, at));
    putResidency(r, adapter, { state: 'loading', since: at, lastUsed: at, fence }, this.mono());
    if (r.registrySeen) r.everLoaded = true;
    else r.loadedUnseen.add(adapter);
    return fence;
  }

  async finishLoad(url: string, adapter: string, fence: Fence, ok: LoadEnd, at: number): Promise<boolean> {
    const r = this.replicas.get(url);
    const cur = r?.residency.get(adapter);
    if (!r || cur?.state !== 'loading' || cur.fence !== fence) return false;
    if (ok === 'static') {
      // Registered at the replica's start ("already loaded"): static as a registry read makes it, and
      // no load of ours for the first read (left as is if that read applied during the load).
      dropResidency(r, adapter);
      putResidency(r, adapter, { state: 'static', since: at, lastUsed: at }, this.mono());
      r.loadedUnseen.delete(adapter);
    } else if (ok === 'replayed') {
      // Sent again after the server lost it: the replica may have changed since (another node's
      // unload, its end and gone mark lost too). Forgotten and gone, as after a failure: a registry
      // read begun before may predate that unload; the next one adopts it if it is there.
      dropResidency(r, adapter);
      markGone(r, adapter, at, this.mono());
    } else if (ok) putResidency(r, adapter, { state: 'loaded', since: at, lastUsed: at }, this.mono());
    else {
      // Ended without it (a failure, or the after-load undo unloaded it): a registry read begun
      // before now may still list it, and must not bring it back.
      dropResidency(r, adapter);
      markGone(r, adapter, at, this.mono());
    }
    return true;
  }

  async beginUnload(
    url: string,
    adapter: string,
    at: number,
    ttlMs?: number,
    forAdapter?: string,
    limit = Infinity,
  ): Promise<Fence | null> {
    const r = this.replicas.get(url);
    const cur = r?.residency.get(adapter);
    if (!r || cur?.state !== 'loaded' || (r.inFlightByAdapter.get(adapter) ?? 0) > 0) return null;
    if (forAdapter !== undefined && forAdapter !== '') {
      if (r.residency.has(forAdapter)) return null;
      // A trim under way (its `for` starts with NUL) frees its slot for no one: not counted.
      let trimming = 0;
      let loading = 0;
      for (const o of r.residency.values()) {
        if (o.state === 'loading') loading++;
        if (o.state !== 'unloading') continue;
        if (o.for === forAdapter) return null;
        if (o.for?.startsWith('\u0000')) trimming++;
      }
      // A trim takes the replica down to its limit, not below: the caller's reading may be stale, or
      // another node's trim may have taken the excess. A load under way is not the trim's: its own
      // after-load check undoes it if it lands over the limit, and a trim counting it as well left
      // the slot empty (dst seed 125407); kept, it is counted once it landed.
      const trim = forAdapter.startsWith('\u0000');
      if (trim && limit !== Infinity && r.residentCount - trimming - loading <= limit) return null;
      // The room made for it is still free (no other load took it, the replica not over its limit).
      const free = r.residentCount - trimming < limit;
      const made = this.roomMade.get(url);
      if ((made?.get(forAdapter) ?? -Infinity) > at && free) return null;
      // A slot is free that no room made for another adapter holds (a load that filled the replica
      // failed after the caller read it full: dst seeds 708211, 848577): load into it, unload nothing.
      if (!trim && limit !== Infinity) {
        let held = 0;
        for (const [name, until] of made ?? [])
          if (name !== forAdapter && until > at && !r.residency.has(name)) held++;
        if (r.residentCount - trimming + held < limit) return null;
      }
    }
    if (ttlMs !== undefined) this.unloadTtls.set(`${url}\u0000${adapter}`, ttlMs);
    const fence = (this.lastFence = nextFence(this.lastFence, at));
    putResidency(r, adapter, { ...cur, state: 'unloading', since: at, fence, for: forAdapter }, this.mono());
    r.missedUnloading.delete(adapter);
    return fence;
  }

  async finishUnload(url: string, adapter: string, fence: Fence, ok: boolean, at: number): Promise<boolean> {
    const r = this.replicas.get(url);
    const cur = r?.residency.get(adapter);
    if (!r || cur?.state !== 'unloading' || cur.fence !== fence) return false;
    const ttl = this.unloadTtls.get(`${url}\u0000${adapter}`);
    this.unloadTtls.delete(`${url}\u0000${adapter}`);
    const missed = r.missedUnloading.delete(adapter);
    if (ok || missed) {
      dropResidency(r, adapter);
      markGone(r, adapter, at, this.mono());
    }
    if (ok) {
      // A trim's `for` (starting with NUL, never an adapter's name) makes room for no one.
      if (cur.for && !cur.for.startsWith('\u0000') && ttl !== undefined) {
        const made = this.roomMade.get(url) ?? new Map<string, number>();
        for (const [name, until] of made) if (until <= at) made.delete(name);
        this.roomMade.set(url, made.set(cur.for, at + ttl));
      }
    } else if (!missed)
      putResidency(r, adapter, { state: 'loaded', since: at, lastUsed: cur.lastUsed }, this.mono());
    return true;
  }

  async holds(url: string, adapter: string, fence: Fence): Promise<boolean> {
    return this.replicas.get(url)?.residency.get(adapter)?.fence === fence;
  }

  async forget(url: string, adapter: string, at: number): Promise<void> {
    const r = this.replicas.get(url);
    if (r?.residency.get(adapter)?.state !== 'loaded') return;
    dropResidency(r, adapter);
    markGone(r, adapter, at, this.mono());
  }

  async touch(url: string, adapter: string, at: number): Promise<void> {
    this.replicas.get(url)?.residency.touch(adapter, at);
  }

  async claimPlacement(
    adapter: string,
    url: string,
    seen: string | undefined,
    at: number,
    ttlMs: number,
    claimer?: string,
  ): Promise<string> {
    const cur = this.placements.get(adapter);
    if (!cur || cur.until <= at) {
      this.placements.set(adapter, { url, until: at + ttlMs, claimers: new Set(claimer ? [claimer] : []) });
      return url;
    }
    if (cur.url === url && claimer) cur.claimers.add(claimer);
    if (cur.url === url) return url;
    if (cur.url !== seen) return cur.url;
    // Spread past the placement seen: placed here now, for this load (else the last claimer of the
    // old placement drops it under the load, and the next cold request places a third copy).
    this.placements.set(adapter, { url, until: at + ttlMs, claimers: new Set(claimer ? [claimer] : []) });
    return url;
  }

  async releasePlacement(adapter: string, url: string, claimer?: string): Promise<void> {
    const cur = this.placements.get(adapter);
    if (cur?.url !== url) return;
    if (claimer) cur.claimers.delete(claimer);
    if (!claimer || cur.claimers.size === 0) this.placements.delete(adapter);
  }

  async acquire(lease: Lease): Promise<ResidencyState | undefined> {
    return this.acquireHere(lease);
  }

  /** As the Redis script: each as `acquire`, those the expiry reclaimed refused (returned). */
  async retake(leases: readonly Lease[]): Promise<string[]> {
    // Bounded as the Redis store's is (one script never runs long): a caller passing more works
    // here and breaks only on Redis, which the simulation and the differential would never see.
    if (leases.length > RETAKE_BATCH)
      throw new Error(`retake: ${leases.length} leases, at most ${RETAKE_BATCH}`);
    const refused: string[] = [];
    for (const l of leases)
      if (this.leases.wasReclaimed(l.id)) refused.push(l.id);
      else this.acquireHere(l);
    return refused;
  }

  /** `acquire` in the call (FleetStore.acquireNow). */
  acquireNow(lease: Lease): ResidencyState | undefined {
    return this.acquireHere(lease);
  }

  private acquireHere(lease: Lease): ResidencyState | undefined {
    const r = this.replicas.get(lease.url);
    const state = lease.adapter === null ? undefined : r?.residency.get(lease.adapter)?.state;
    this.leases.take(lease);
    return state;
  }

  async release(leaseId: string, at: number, status?: number): Promise<Released | undefined> {
    return this.releaseHere(leaseId, at, status);
  }

  /** `release` in the call (FleetStore.releaseNow). */
  releaseNow(leaseId: string, at: number, status?: number): Released | undefined {
    return this.releaseHere(leaseId, at, status);
  }

  private releaseHere(leaseId: string, at: number, status?: number): Released | undefined {
    const lease = this.leases.end(leaseId);
    if (!lease) return undefined;
    // One step, as the Redis script is: nothing awaits between the lease's end and what it records.
    if (lease.adapter !== null) this.replicas.get(lease.url)?.residency.touch(lease.adapter, at);
    if (status !== undefined) this.passiveOutcome(lease.url, status < 500, at);
    const left =
      lease.adapter === null ? 1 : (this.replicas.get(lease.url)?.inFlightByAdapter.get(lease.adapter) ?? 0);
    return { ...lease, adapterIdle: left === 0 };
  }

  async expireLeases(now: number, maxAgeMs: number): Promise<Lease[]> {
    return this.leases.expire(now, maxAgeMs).map(({ id, lease, why }) => {
      // `why` is worded as the Redis script words it (the status page shows either).
      this.event({
        at: now,
        url: lease.url,
        adapter: lease.adapter ?? '',
        op: 'lease-expired',
        result: 'error',
        detail: `lease ${id} ${why}`,
      });
      return { ...lease };
    });
  }

  async inFlightTotal(): Promise<number> {
    return this.leases.size;
  }

  async spendBudget(key: string, limit: number, windowMs: number, at: number): Promise<number> {
    return (await this.takeBudget(key, limit, windowMs, at)).waitMs;
  }

  /** As scripts/budget.ts `budget`: a refused spend is not counted. */
  async takeBudget(key: string, limit: number, windowMs: number, at: number): Promise<BudgetTaken> {
    let b = this.budgets.get(key);
    if (!b || b.ends <= at) this.budgets.set(key, (b = { opened: at, ends: at + windowMs, used: 0 }));
    if (b.used >= limit) return { waitMs: b.ends - at, window: null };
    b.used++;
    return { waitMs: 0, window: { key, opened: b.opened } };
  }

  /** As scripts/budget.ts `budgetRefund`: into the window the units were counted in only. */
  async refundBudget(window: BudgetWindow, count: number, at: number): Promise<number> {
    const b = this.budgets.get(window.key);
    if (!b || b.ends <= at || b.opened !== window.opened) return 0;
    const back = Math.max(0, Math.min(count, b.used));
    b.used -= back;
    return back;
  }

  async pushEvent(e: FleetEvent): Promise<void> {
    this.event(e);
  }

  async events(limit: number): Promise<FleetEvent[]> {
    return this.eventLog.slice(-limit).map((e) => ({ ...e }));
  }

  async dump(): Promise<FleetDump> {
    return {
      replicas: [...this.replicas.values()].map((r) => {
        const { adapter: _none, ...v } = replicaView(r);
        return {
          ...v,
          adapters: residentsOf(r),
          llamaAdapters: r.llamaAdapters.map((a) => ({ ...a })),
        };
      }),
    };
  }

  private event(e: FleetEvent): void {
    this.eventLog.push(e);
    if (this.eventLog.length > EVENT_LIMIT) this.eventLog.splice(0, this.eventLog.length - EVENT_LIMIT);
  }
}

/** The event's detail, as the Redis script words it. */
export const FORGOTTEN_DETAIL = 'no node routes to it: forgotten';

function sameUrls(records: readonly ReplicaRecord[], urls: readonly string[]): boolean {
  if (records.length !== urls.length) return false;
  for (let i = 0; i < urls.length; i++) if (records[i]!.spec.url !== urls[i]) return false;
  return true;
}

/**
 * Whether snapshot `s`, begun at `startedAt`, began before the record's newest applied poll (older
 * news): on the monotonic clock where both said, as one process's polls and Kong's markings do
 * (this store is a process's own), else on the wall clock. A skew correction steps the wall clock:
 * stepped back 141 ms, Kong's 502 dated by it read older than an up poll begun before it and was
 * dropped, and the node, deciding alone, routed there again (dst seed 2902860).
 */
function begunBefore(s: ReplicaSnapshot, startedAt: number, r: ReplicaRecord): boolean {
  return s.monoStartedAt !== undefined && r.scrapedMonoAt !== undefined
    ? s.monoStartedAt < r.scrapedMonoAt
    : startedAt < r.scrapedAt;
}

/** When the record's newest poll began, on the wall clock and, when it said, the monotonic one. */
function pollStart(r: ReplicaRecord): { startedAt: number; monoStartedAt?: number } {
  return r.scrapedMonoAt === undefined
    ? { startedAt: r.scrapedAt }
    : { startedAt: r.scrapedAt, monoStartedAt: r.scrapedMonoAt };
}
