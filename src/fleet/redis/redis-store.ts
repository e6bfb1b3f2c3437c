import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import type { RedisConfig } from '../../config/redis-schema';
import type { Logger } from '../../log';
import { LEASE_CEILING } from '../memory-leases';
import { PASSIVE_FAILURE_LIMIT } from '../memory-store';
import {
  RETAKE_BATCH,
  type BudgetTaken,
  type BudgetWindow,
  type FleetDump,
  type FleetStore,
  type LoadEnd,
} from '../store';
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
} from '../types';
import { keepConnected, RedisConnection, redisOptions, ServerSwitched } from './connection';
import { nextNodeCount, NO_COUNT, type NodeCount } from './live-nodes';
import { leaseOf, llamaOf, pairs, residentsOf, viewOf, viewsReply, type Reply } from './replies';
import { scriptSource, SCRIPTS, type ScriptName } from './scripts';

/**
 * The fleet state in Redis, shared by every Kong node (and plugin-server process) configured
 * with the same Redis and prefix. Each operation is one Lua script (see scripts.ts), so the
 * races that matter (one load per adapter, no unload under any node's request, release once)
 * are decided in Redis. Errors propagate: FailoverFleetStore decides what to do without Redis.
 */
export class RedisFleetStore implements FleetStore {
  readonly client: Redis;
  private readonly subscriber: Redis;
  private readonly prefix: string;
  private heartbeatTimer: NodeJS.Timeout | null = null;
  /** How the client is created, and when it may be used (connection.ts). */
  private readonly link: RedisConnection;
  onRemoteChange: (() => void) | null = null;
  private closed = false;
  /** Cleared by unsubscribe(): the subscriber stays closed. */
  private listening = true;
  /**
   * The shared state's epoch as this node last saw it (see scripts.ts): null before the first
   * answer. `stateLost` is set when it changed or vanished (Redis was emptied: FLUSHALL, or a
   * restart without persistence), until `takeStateLost` reads it.
   */
  private epoch: string | null = null;
  private stateLost = false;
  /** Told when the epoch changed or vanished (from the heartbeat: a node may have no decision to make). */
  onStateLost: (() => void) | null = null;
  /**
   * Nodes heartbeating on this state, as last seen whole (`noteNodes`): shares of budgets in an
   * outage. Null until this process first saw the count whole (a process started during an
   * outage, or while the state is younger than node_ttl_ms, knows nothing of the fleet).
   */
  get liveNodes(): number | null {
    return this.nodeCount.nodes;
  }
  private count: NodeCount = NO_COUNT;
  get nodeCount(): NodeCount {
    return this.count;
  }

  constructor(
    private readonly config: RedisConfig,
    /** This node's id: its leases die with it (`node_ttl_ms` after its last heartbeat). */
    readonly node: string,
    log?: Logger,
  ) {
    this.prefix = config.prefix;
    this.link = new RedisConnection(config, log);
    this.client = this.link.client;
    for (const name of Object.keys(SCRIPTS) as ScriptName[]) {
      this.client.defineCommand(name, { numberOfKeys: 0, lua: scriptSource(name) });
    }
    // Pub/sub needs its own connection; it wakes this node's waiters for room.
    this.subscriber = new Redis({
      ...redisOptions(config),
      enableOfflineQueue: true,
      commandTimeout: undefined,
      // ioredis 5.11.1 re-subscribes after a reconnect from its ready handler and handles no
      // failure of that SUBSCRIBE (built/redis/event_handler.js `readyHandler`; redis/ioredis#2187,
      // merged after 6.0.0): a link closed before Redis answers (a reset, or close() here) rejects
      // a promise nobody holds, and Node ends the plugin server. This subscribes on every
      // 'ready' itself, and catches.
      autoResubscribe: false,
    });
    this.subscriber.on('error', () => {});
    keepConnected(this.subscriber, () => this.closed || !this.listening);
    this.subscriber.on('message', () => this.onRemoteChange?.());
    this.subscriber.on('ready', () => {
      this.subscriber.subscribe(`${this.prefix}changed`).catch(() => {});
    });
    this.heartbeat();
    this.heartbeatTimer = setInterval(() => this.heartbeat(), Math.max(100, config.node_ttl_ms / 4));
    this.heartbeatTimer.unref();
  }

  /** A script's call; `args` as a function is read once connected (prune's list of held leases). */
  private async run(
    name: ScriptName,
    ...args: (string | number)[] | [() => (string | number)[]]
  ): Promise<Reply> {
    const client = await this.connection();
    const scripts = client as unknown as Record<string, (...a: (string | number)[]) => Promise<Reply>>;
    const values = typeof args[0] === 'function' ? args[0]() : (args as (string | number)[]);
    return scripts[name]!.call(client, this.prefix, ...values);
  }

  /** The client once connected to a usable server, waiting up to the timeout (see RedisConnection). */
  private connection(): Promise<Redis> {
    return this.link.ready();
  }

  private heartbeat(): void {
    this.run('heartbeat', this.node)
      .then((r) => {
        const [epoch, nodes] = r as [string | null, [number, number]];
        this.noteNodes(nodes);
        if (this.noteEpoch(epoch)) this.onStateLost?.();
      })
      .catch((err: unknown) => {
        // The switch is said once, to the first call: when that is the heartbeat, the leases
        // the old primary acknowledged but never replicated must still be taken again here.
        if (err instanceof ServerSwitched) {
          this.stateLost = true;
          this.onStateLost?.();
        }
      });
  }

  /**
   * Records the live-node count a reply carried, with the age of the state's epoch: a young
   * state's count is only a floor, a whole count that went down is held for one budget window,
   * and a process that saw none whole knows none (it grants nothing alone, as one started during
   * an outage): src/fleet/redis/live-nodes.ts.
   */
  private noteNodes([nodes, epochAgeMs]: [number, number]): void {
    this.count = nextNodeCount(this.count, nodes, epochAgeMs, this.config.node_ttl_ms);
  }

  /** Records the epoch a reply carried; true if the state was emptied since the last one seen. */
  private noteEpoch(epoch: string | null): boolean {
    const lost = epoch === null || (this.epoch !== null && epoch !== this.epoch);
    if (epoch !== null) this.epoch = epoch;
    if (lost) this.stateLost = true;
    return lost;
  }

  /** The shared state's epoch as last seen (null before any): what a count made now is counted under. */
  get currentEpoch(): string | null {
    return this.epoch;
  }

  /**
   * The epoch the runtime this store's replaces on the same state last saw (one node id, a new
   * connection): this node knew that state, so a reply without that epoch says it was emptied,
   * and a registration that begins it anew asks the grace (seed 150271's kind).
   */
  inheritEpoch(epoch: string | null): void {
    this.epoch ??= epoch;
  }

  /**
   * The node count the runtime this store's replaces on the same state kept (the same node): its
   * larger count held for the window goes on here. Read afresh, this link's first whole count
   * was the lower one, taken as it is, and the node granted a larger share alone than its
   * predecessor would have (the simulation's seed 3454282).
   */
  inheritNodeCount(count: NodeCount): void {
    if (this.count.nodes === null) this.count = count;
  }

  /** Whether Redis was emptied since this was last asked (the caller then takes its state back). */
  takeStateLost(): boolean {
    const lost = this.stateLost;
    this.stateLost = false;
    return lost;
  }

  async upsertReplica(spec: ReplicaSpec): Promise<void> {
    // This node knew the state before it was emptied: should this call begin it anew, no node
    // unloads for node_ttl_ms, time for every live node's heartbeats to find the new state and
    // re-take their leases (scripts.ts `upsert`).
    const grace = this.epoch !== null ? this.config.node_ttl_ms : 0;
    const epoch = (await this.run(
      'upsert',
      spec.url,
      JSON.stringify(spec),
      randomBytes(8).toString('hex'),
      grace,
      // Claimed for this node (scripts/forgetting.ts): a registration then a list never forgets it.
      this.node,
    )) as string;
    this.noteEpoch(epoch);
  }

  /**
   * scripts/forgetting.ts `retain`: claims by this node, lapsing past node_ttl_ms (after its last
   * claim or heartbeat). `at`: the event's time (default: Redis time).
   */
  async retainReplicas(urls: readonly string[], graceMs: number, at?: number): Promise<string[]> {
    // Finite for the script's score range (a grace past any state's age forgets nothing anyway).
    const grace = Math.ceil(Math.min(Math.max(0, graceMs), Number.MAX_SAFE_INTEGER));
    return (await this.run(
      'retain',
      this.node,
      grace,
      this.config.node_ttl_ms,
      at ?? '',
      ...urls,
    )) as string[];
  }

  async replicaSpecs(): Promise<ReplicaSpec[]> {
    const all = await (await this.connection()).hgetall(`${this.prefix}spec`);
    return Object.values(all).map((s) => JSON.parse(s) as ReplicaSpec);
  }

  async views(urls: readonly string[], adapter?: AdapterRef, withResidents = false): Promise<ReplicaView[]> {
    const reply = await this.run('views', adapter?.name ?? '', withResidents ? '1' : '0', this.node, ...urls);
    return this.viewsOf(reply, adapter, withResidents);
  }

  async viewsAndLease(
    urls: readonly string[],
    adapter: AdapterRef | undefined,
    lease: Lease,
  ): Promise<{ views: ReplicaView[]; state: ResidencyState | undefined }> {
    const [views, state] = (await this.run(
      'viewsAndLease',
      lease.id,
      lease.url,
      lease.adapter ?? '',
      lease.at,
      this.node,
      adapter?.name ?? '',
      ...urls,
    )) as [Reply, ResidencyState | null];
    return { views: this.viewsOf(views, adapter, false), state: state ?? undefined };
  }

  /** The `views` script's reply as views (the epoch and node count it carries noted). */
  private viewsOf(reply: Reply, adapter: AdapterRef | undefined, withResidents: boolean): ReplicaView[] {
    const { views, epoch, nodes } = viewsReply(reply, adapter, withResidents);
    this.noteNodes(nodes);
    this.noteEpoch(epoch);
    return views;
  }

  async applySnapshot(url: string, s: ReplicaSnapshot): Promise<void> {
    // Which new names a configuration manages is known only here: ask for every entry.
    // `managed` left out when no configurations are known (the script then goes by the names loaded).
    const registry = s.registry?.map((e) => ({ ...e, managed: s.managed?.(e.name, e.path) }));
    const body = {
      at: s.at,
      startedAt: s.startedAt ?? s.at,
      sharedStartedAt: s.sharedStartedAt,
      // For the script's estimate of the start when the poll read no shared clock.
      took: pollDuration(s),
      startedOnArrival: s.startedOnArrival === true,
      ok: s.ok,
      error: s.error ?? '',
      verdictOnly: s.verdictOnly === true,
      load: s.load
        ? {
            waiting: s.load.waiting,
            running: s.load.running,
            kvUsage: s.load.kvUsage,
            // Their leases are renewed: the replica runs requests for them.
            activeAdapters: s.load.activeAdapters,
          }
        : undefined,
      registry,
    };
    await this.run(
      'snapshot',
      url,
      JSON.stringify(body),
      s.llamaAdapters ? JSON.stringify(s.llamaAdapters) : '',
    );
  }

  async reportOutcome(url: string, ok: boolean, at: number): Promise<void> {
    await this.run('outcome', url, ok ? '1' : '0', at, PASSIVE_FAILURE_LIMIT);
  }

  /** `at` only asks for the leases' ages: the script dates them by Redis's clock. */
  async residents(url: string, at?: number): Promise<ResidentAdapter[]> {
    const [res, busy, held] = (await this.run('residents', url, at === undefined ? '' : '1')) as [
      string[],
      string[],
      string[] | undefined,
    ];
    return residentsOf(res, busy, held);
  }

  async beginLoad(
    url: string,
    adapter: string,
    at: number,
    limit: number,
    ttlMs: number,
  ): Promise<Fence | null> {
    return (await this.run('beginLoad', url, adapter, at, limit, Math.ceil(ttlMs), this.node)) as
      | number
      | null;
  }

  /** `own`: only this node's lock under `fence` (shared-store.ts); else any holder's, as the memory store. */
  async finishLoad(
    url: string,
    adapter: string,
    fence: Fence,
    ok: LoadEnd,
    at: number,
    own = false,
  ): Promise<boolean> {
    const end = ok === 'static' || ok === 'replayed' ? ok : ok ? '1' : '0';
    return (await this.run('finishLoad', url, adapter, fence, end, at, own ? this.node : '')) === 1;
  }

  async beginUnload(
    url: string,
    adapter: string,
    at: number,
    ttlMs: number,
    forAdapter = '',
    limit = Infinity,
  ): Promise<Fence | null> {
    const max = Number.isFinite(limit) ? limit : '';
    return (await this.run('beginUnload', url, adapter, at, Math.ceil(ttlMs), this.node, forAdapter, max)) as
      | number
      | null;
  }

  async finishUnload(
    url: string,
    adapter: string,
    fence: Fence,
    ok: boolean,
    at: number,
    own = false,
  ): Promise<boolean> {
    return (
      (await this.run('finishUnload', url, adapter, fence, ok ? '1' : '0', at, own ? this.node : '')) === 1
    );
  }

  async holds(url: string, adapter: string, fence: Fence, own = false): Promise<boolean> {
    return (await this.run('holds', url, adapter, fence, own ? this.node : '')) === 1;
  }

  async forget(url: string, adapter: string, at: number): Promise<void> {
    await this.run('forget', url, adapter, at);
  }

  async touch(url: string, adapter: string, at: number): Promise<void> {
    await this.run('touch', url, adapter, at);
  }

  async claimPlacement(
    adapter: string,
    url: string,
    seen: string | undefined,
    _at: number,
    ttlMs: number,
    claimer?: string,
  ): Promise<string> {
    const ttl = Math.max(1, Math.ceil(ttlMs));
    return (await this.run('place', adapter, url, seen ?? '', ttl, claimer ?? '')) as string;
  }

  async releasePlacement(adapter: string, url: string, claimer?: string): Promise<void> {
    await this.run('unplace', adapter, url, claimer ?? '');
  }

  async acquire(lease: Lease): Promise<ResidencyState | undefined> {
    const state = await this.run('acquire', lease.id, lease.url, lease.adapter ?? '', lease.at, this.node);
    return (state as ResidencyState | null) ?? undefined;
  }

  /** Takes again leases this node holds, one script; the ids the expiry sweep reclaimed (they stay so). */
  async retake(leases: readonly Lease[]): Promise<string[]> {
    // One script never runs long: Redis runs it alone, every node's calls behind it.
    if (leases.length > RETAKE_BATCH)
      throw new Error(`retake: ${leases.length} leases, at most ${RETAKE_BATCH}`);
    if (leases.length === 0) return [];
    const args = leases.flatMap((l) => [l.id, l.url, l.adapter ?? '', l.at]);
    return (await this.run('retake', this.node, ...args)) as string[];
  }

  async release(leaseId: string, at: number, status?: number): Promise<Released | undefined> {
    const r = (await this.run('release', leaseId, at, status ?? '', PASSIVE_FAILURE_LIMIT)) as
      | [string, number]
      | null;
    if (!r) return undefined;
    return { ...leaseOf(r[0]), adapterIdle: r[1] === 1 };
  }

  async expireLeases(now: number, maxAgeMs: number): Promise<Lease[]> {
    const raws = (await this.run(
      'expire',
      now,
      maxAgeMs,
      this.config.node_ttl_ms,
      LEASE_CEILING * maxAgeMs,
    )) as string[];
    return raws.map(leaseOf);
  }

  async inFlightTotal(): Promise<number> {
    return (await this.connection()).hlen(`${this.prefix}lease`);
  }

  async spendBudget(key: string, limit: number, windowMs: number, at: number): Promise<number> {
    return (await this.takeBudget(key, limit, windowMs, at)).waitMs;
  }

  async takeBudget(key: string, limit: number, windowMs: number, _at: number): Promise<BudgetTaken> {
    const [waitMs, opened] = (await this.run('budget', key, limit, Math.max(1, Math.ceil(windowMs)))) as [
      number,
      string | null,
    ];
    return { waitMs, window: waitMs === 0 && opened !== null ? { key, opened: Number(opened) } : null };
  }

  async refundBudget(window: BudgetWindow, count: number, _at: number): Promise<number> {
    if (count <= 0) return 0;
    return (await this.run('budgetRefund', window.key, String(window.opened), count)) as number;
  }

  /** Adds `count` cold loads counted elsewhere (a node deciding alone) to `key`'s current window. */
  async addToBudget(key: string, count: number, windowMs: number): Promise<void> {
    await this.run('budgetAdd', key, count, Math.max(1, Math.ceil(windowMs)));
  }

  async pushEvent(e: FleetEvent): Promise<void> {
    await this.run('event', JSON.stringify(e));
  }

  async events(limit: number): Promise<FleetEvent[]> {
    const raws = await (await this.connection()).lrange(`${this.prefix}events`, 0, limit - 1);
    return raws.reverse().map((r) => JSON.parse(r) as FleetEvent);
  }

  async dump(): Promise<FleetDump> {
    const rows = (await this.run('dump')) as [string, string, string[], string[], string[]][];
    return {
      replicas: rows.map(([url, spec, figures, res, busy]) => {
        const r = pairs(figures);
        const { adapter: _none, ...v } = viewOf(url, JSON.parse(spec) as ReplicaSpec, r);
        return { ...v, adapters: residentsOf(res, busy), llamaAdapters: llamaOf(r) };
      }),
    };
  }

  async sharedTime(): Promise<number> {
    const [sec, usec] = await (await this.connection()).time();
    return Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
  }

  /**
   * Drops this node's leases in Redis that `held` does not name (scripts.ts `prune`). `held` is
   * read once connected, just before the script is sent: an acquire sent earlier is named there.
   */
  async prune(held: () => string[], leaving = false): Promise<number> {
    return (await this.run('prune', () => [this.node, JSON.stringify(held()), leaving ? 1 : 0])) as number;
  }

  /** The failover store's probe: it takes this node's leases there again after, whatever server answers. */
  async ping(): Promise<string> {
    return (await this.link.ready(true)).ping();
  }

  mode(): 'redis' {
    return 'redis';
  }

  unsubscribe(): void {
    this.listening = false;
    this.subscriber.disconnect();
  }

  async close(): Promise<void> {
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    this.heartbeatTimer = null;
    this.closed = true;
    this.subscriber.disconnect();
    this.link.close();
  }
}
