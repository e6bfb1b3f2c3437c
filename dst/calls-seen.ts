/**
 * The record of calls each replica saw from the runtimes, as the checks read them: load and
 * unload calls with their sender, the unload locks the shared store granted, the placements a
 * runtime claimed past another's, and when each runtime last asked a replica's `/metrics`.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { ReplicaHttp } from '../src/backends/http';
import type { OutageBudget } from '../src/fleet/redis/outage-budget';
import type { FleetRuntime } from '../src/runtime';
import type { LoadCall, PlacementSpread } from './invariants';
import type { LockLife, RedisLink } from './redis-model';
import { urlParts } from './replicas';
import type { NodeClock, Scheduler } from './scheduler';
import type { UnloadCall } from './trim-check';
import type { Read, Unloader } from './unseen-check';
import type { LoadClaim } from './room-making';

/**
 * The request whose access phase is running (its arrival number): a load call sent within it is
 * that request's. The budget charges a request once however often it loads (docs/reliability.md,
 * "A request is charged once however often escalation moves it").
 */
/** Reads kept per runtime and replica: a poll each second, the hold 2 s. */
const READS_KEPT = 16;

export const routingRequest = new AsyncLocalStorage<number>();

/** The key of a request's placement of `adapter` on `url`. */
const placementKey = (request: number | undefined, adapter: string, url: string) =>
  `${request}\u0000${adapter}\u0000${url}`;

/** One adapter a prefetch tick has the manager make resident on one replica (`AdapterManager.ensure`). */
export interface PrefetchEnsure {
  adapter: string;
  url: string;
  proc: string;
  /** Load calls and victims' unloads sent within it. */
  loads: number;
  unloads: number;
  /** When it ended (undefined: under way), and the name of the error it ended with, if any. */
  endedAt?: number;
  error?: string;
}

/**
 * A prefetch tick running (src/prefetch/prefetcher.ts), and within it the load of one adapter
 * (`ensure`): the calls sent within are prefetching's, a victim's unload made room for that adapter.
 */
export const prefetching = new AsyncLocalStorage<{ ensure?: PrefetchEnsure }>();

export class CallsSeen {
  /** By replica and adapter: the sender of the last unload there, whether it decided alone, its state and its word's time. */
  readonly unloaders = new Map<string, Unloader>();
  /** By replica (origin): when any runtime last sent it a call (a poll, a load, an unload...). */
  readonly lastCallAt = new Map<string, number>();
  /** By sender (a runtime: node-processes.ts `senderOf`): its last call to a replica, when and to which. */
  readonly lastBySender = new Map<string, { at: number; url: string }>();
  /** By replica, then sender: the last call it sent there (what `lastCallAt` is, sender by sender). */
  readonly lastCallBy = new Map<string, Map<string, number>>();
  /** By runtime and replica: when it last asked the replica's `/metrics`. */
  private readonly askedAt = new Map<string, number>();
  /** By runtime and replica: its `/metrics` reads answered, the latest `READS_KEPT` (the busy-unload check's hold). */
  private readonly reads = new Map<string, Read[]>();
  /** Load calls as each runtime sent them (the checks read them after each step). */
  readonly loadCalls: LoadCall[] = [];
  /** The unload calls the runtimes sent, with the request whose decision sent each (none: a trim). */
  readonly unloadCalls: UnloadCall[] = [];
  /** Placements a runtime claimed past another's, as Redis granted them (the one-load-per-burst check). */
  readonly spreads: PlacementSpread[] = [];
  /** The load slots the shared store granted the runtimes (`beginLoad`), with when each was ended. */
  readonly loadClaims: LoadClaim[] = [];
  /** By runtime and fence: the index of its claim in `loadClaims`. */
  private readonly claims = new Map<string, number>();
  /** By runtime, replica and adapter: when the shared store last granted it an unload (its lock). */
  private readonly unloadGrants = new Map<
    string,
    { asked: number; answered: number; lock: LockLife | undefined }
  >();
  /** By request (arrival number): the adapter it routes, the load its make-room unloads are for. */
  readonly adapterOf = new Map<number, string>();
  /** By request (arrival number): the replicas the configuration routing it lists (its load calls carry them). */
  readonly listedOf = new Map<number, readonly string[]>();
  /** By request, adapter and replica: when the request first won the adapter's placement there (shared store). */
  private readonly placedAt = new Map<string, number>();
  /** The adapters prefetch ticks had the manager make resident, in the order they began. */
  readonly prefetchEnsures: PrefetchEnsure[] = [];
  /** Load calls sent and not answered yet (any node). */
  loadsInFlight = 0;
  /** By request (arrival number): when its process was granted its cold-load spend, and how. */
  private readonly spendGrants = new Map<number, { at: number; alone: boolean }>();
  /** By request (arrival number): the spans its decision's calls spent on a slow path. */
  private readonly slowSpans = new Map<number, { from: number; to: number }[]>();

  constructor(
    private readonly sched: Scheduler,
    /** Whether the world is degraded now (World.degraded). */
    private readonly degraded: () => boolean,
  ) {}

  /**
   * Notes a call sent over a slow path (`hopMs` each way) within a request's decision (its
   * ReplicaSet's `slowCallSeen`): from its sending until it settles, at most its hops both ways
   * (the replica's own time stays in the hold's bound). Returns what to call once it settles.
   */
  slowCallSeen(hopMs: number): () => void {
    const request = routingRequest.getStore();
    if (request === undefined) return () => undefined;
    const from = this.sched.now();
    return () => {
      let spans = this.slowSpans.get(request);
      if (!spans) this.slowSpans.set(request, (spans = []));
      spans.push({ from, to: Math.min(this.sched.now(), from + 2 * hopMs) });
    };
  }

  /** The time `request`'s decision waited on slow paths so far (calls at once counted once). */
  slowMs(request: number): number {
    const spans = [...(this.slowSpans.get(request) ?? [])].sort((a, b) => a.from - b.from);
    let total = 0;
    let end = -Infinity;
    for (const { from, to } of spans) {
      if (to <= end) continue;
      total += to - Math.max(from, end);
      end = to;
    }
    return total;
  }

  /**
   * Notes each placement a runtime claims, and wins, past another it saw (`seen`): a copy on
   * purpose; and when each request first won the placement of its adapter on a replica (`placedAt`).
   */
  spreadsSeen(link: RedisLink): void {
    const claim = link.claimPlacement.bind(link);
    link.claimPlacement = async (adapter, url, seen, ...rest) => {
      const request = routingRequest.getStore();
      const placed = await claim(adapter, url, seen, ...rest);
      if (seen && seen !== url && placed === url)
        this.spreads.push({ at: this.sched.now(), adapter, url, past: seen });
      const key = placementKey(request, adapter, url);
      if (placed === url && request !== undefined && !this.placedAt.has(key))
        this.placedAt.set(key, this.sched.now());
      return placed;
    };
  }

  /**
   * Notes when each unload lock the shared store grants a runtime (`sender`) was asked for, and
   * each load slot it grants, until the runtime ends it (seed 494165: a claim whose process died
   * before its load call still counted in the store), its answer lost or not (seed 885877), its
   * process dead before the answer came or not.
   */
  grantsSeen(link: RedisLink, sender: string): void {
    // Noted as the store grants it, not as its answer comes back: an unload the store grants next
    // was judged with it counted (seed 2223196: chat's slot, its answer still on its way to node 1
    // when the unload it left room for answered). A grant whose answer never comes (seed 885877:
    // sql's slot on a slowed link, counted for 8 s) is noted the same; its holder never ends it.
    link.grantRan = (url, adapter, fence, ttlMs) => {
      const lock = link.lockLife(fence);
      const at = lock?.at ?? this.sched.now();
      this.claims.set(
        `${sender}\u0000${fence}`,
        this.loadClaims.push({
          at,
          url,
          name: adapter,
          sender,
          until: at + ttlMs,
          ...(lock ? { lock } : {}),
        }) - 1,
      );
    };
    const finishLoad = link.finishLoad.bind(link);
    link.finishLoad = async (url, adapter, fence, ...rest) => {
      const k = this.claims.get(`${sender}\u0000${fence}`);
      if (k !== undefined) this.loadClaims[k]!.endedAt ??= this.sched.now();
      return finishLoad(url, adapter, fence, ...rest);
    };
    const begin = link.beginUnload.bind(link);
    link.beginUnload = async (url, adapter, ...rest) => {
      const asked = this.sched.now();
      const fence = await begin(url, adapter, ...rest);
      if (fence !== null)
        this.unloadGrants.set(`${sender}\u0000${url}\u0000${adapter}`, {
          asked,
          answered: this.sched.now(),
          lock: link.lockLife(fence),
        });
      return fence;
    };
  }

  /**
   * Process `proc` died: its unload calls still open end now (the load slots granted whose answers
   * it still owed were noted as the store granted them: `grantsSeen`). Its HTTP calls never settle
   * (dst/replicas.ts) and its clock stops, so without this they stayed under way for the rest of
   * the run, and the room check counted their requests' slots forever (review2).
   */
  died(proc: string): void {
    const now = this.sched.now();
    for (const c of this.unloadCalls) if (c.proc === proc && c.endedAt === undefined) c.endedAt = now;
  }

  /**
   * Notes when the process of `rt` grants each request's cold-load spend, and how: Redis's grant
   * as its answer comes back (`spentShared`), or one of the node's share (`spendAlone` answering
   * 0). A load call carries its request's (the share check: seed 487008, a grant alone whose call
   * went out after Redis granted three more). Wrapped on this store's budget only; they return as
   * before.
   */
  budgetSeen(rt: FleetRuntime): void {
    const budget = (rt.store as unknown as { budget?: OutageBudget }).budget;
    if (!budget) return;
    const note = (alone: boolean) => {
      const request = routingRequest.getStore();
      if (request !== undefined) this.spendGrants.set(request, { at: this.sched.now(), alone });
    };
    const shared = budget.spentShared.bind(budget);
    budget.spentShared = (...args) => {
      shared(...args);
      note(false);
    };
    const alone = budget.spendAlone.bind(budget);
    budget.spendAlone = (...args) => {
      const waitMs = alone(...args);
      if (waitMs === 0) note(true);
      return waitMs;
    };
  }

  /**
   * Runs `rt`'s prefetch ticks within `prefetching`, and each adapter the tick has the manager
   * ensure within a context of its own (the ticks load in parallel). Wrapped on this instance only;
   * they return as before.
   */
  prefetchSeen(rt: FleetRuntime, proc: string): void {
    const tick = rt.prefetcher.maybeTick.bind(rt.prefetcher);
    rt.prefetcher.maybeTick = () => prefetching.run({}, tick);
    const ensure = rt.manager.ensure.bind(rt.manager);
    rt.manager.ensure = (url, adapter, ...rest) => {
      if (!prefetching.getStore() || routingRequest.getStore() !== undefined)
        return ensure(url, adapter, ...rest);
      const e: PrefetchEnsure = { adapter: adapter.name, url, proc, loads: 0, unloads: 0 };
      this.prefetchEnsures.push(e);
      const p = prefetching.run({ ensure: e }, () => ensure(url, adapter, ...rest));
      // Beside the prefetcher's own handlers: noted no later than it reads the outcome.
      p.then(
        () => (e.endedAt = this.sched.now()),
        (err: Error) => {
          e.endedAt = this.sched.now();
          e.error = err.constructor.name;
        },
      );
      return p;
    };
  }

  /**
   * Notes, for each unload a runtime sends, whether it decided alone then (its store degraded):
   * such an unload (the after-load undo) cannot see requests other nodes route to the adapter.
   * Each load call goes to the checks with its sender (`proc`: the plugin-server process), the
   * time on its clock and whether it decided alone.
   */
  record(
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
      this.lastCallAt.set(origin, this.sched.now());
      this.lastBySender.set(sender, { at: this.sched.now(), url: origin });
      let by = this.lastCallBy.get(origin);
      if (!by) this.lastCallBy.set(origin, (by = new Map()));
      by.set(sender, this.sched.now());
      if (url.endsWith('/metrics')) {
        const key = `${sender}\u0000${origin}`;
        const asked = this.sched.now();
        this.askedAt.set(key, asked);
        const reply = call(method, url, timeoutMs, body);
        // Beside the caller's handlers: noted no later than the caller reads it.
        reply.then(
          () => {
            let list = this.reads.get(key);
            if (!list) this.reads.set(key, (list = []));
            list.push({ asked, answered: this.sched.now() });
            if (list.length > READS_KEPT) list.shift();
          },
          () => undefined,
        );
        return reply;
      }
      if (url.endsWith('/v1/unload_lora_adapter') && name !== undefined) {
        const grant = `${sender}\u0000${origin}\u0000${name}`;
        const granted = this.unloadGrants.get(grant);
        this.unloadGrants.delete(grant);
        this.unloaders.set(`${origin}\u0000${name}`, {
          proc,
          alone,
          db,
          wordAt: this.askedAt.get(`${sender}\u0000${origin}`) ?? -Infinity,
          reads: this.reads.get(`${sender}\u0000${origin}`) ?? [],
          ...(granted === undefined ? {} : { grantAnsweredAt: granted.answered }),
        });
        const request = routingRequest.getStore();
        const prefetch = request === undefined ? prefetching.getStore() : undefined;
        if (prefetch?.ensure) prefetch.ensure.unloads++;
        const adapter = request === undefined ? prefetch?.ensure?.adapter : this.adapterOf.get(request);
        const sent: UnloadCall = {
          at: this.sched.now(),
          url: origin,
          name,
          request,
          ...(adapter === undefined ? {} : { for: adapter }),
          ...(prefetch ? { prefetch: true as const } : {}),
          ...(prefetch?.ensure ? { prefetchEnsure: prefetch.ensure } : {}),
          proc,
          alone,
          ...(granted === undefined ? {} : { grantedAt: granted.asked }),
          ...(granted?.lock === undefined ? {} : { lock: granted.lock }),
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
      const prefetch = sent.request === undefined ? prefetching.getStore() : undefined;
      if (prefetch) sent.prefetch = true;
      if (prefetch?.ensure) prefetch.ensure.loads++;
      const grant = sent.request === undefined ? undefined : this.spendGrants.get(sent.request);
      if (grant) sent.grant = grant;
      const listed = sent.request === undefined ? undefined : this.listedOf.get(sent.request);
      if (listed) sent.listed = listed;
      const placedAt = this.placedAt.get(placementKey(sent.request, name, sent.url));
      if (placedAt !== undefined) sent.placedAt = placedAt;
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
}
