import type { Resolved } from '../adapters/catalog';
import { PlacedElsewhere } from '../adapters/claims';
import type { EvictionPolicy } from '../adapters/eviction';
import { Wanting } from '../adapters/room-wants';
import type { RouterConfig } from '../config/router-schema';
import { errors } from '../errors';
import type { AdapterRef, ReplicaView } from '../fleet/types';
import type { FleetRuntime } from '../runtime';
import { toCandidate, type SchedulingPipeline } from '../scheduler/pipeline';
import { heldOffThere } from '../scheduler/filters/load-backoff';
import { loadCost } from '../scheduler/victims';
import type { Decision, SchedulingContext } from '../scheduler/types';
import { LeaseHandle } from '../lease';
import { inFlightHere, joinUnderWay } from './in-flight-here';
import { withPolledHealth } from './polled-health';
import { stallsOf } from './prediction';
import type { RoomWait } from './room-wait';

/**
 * Whether a request of this process sent to `v` would make a load of `adapter` there that this
 * process holds off after a failure (src/adapters/backoff.ts; the `load-backoff` filter's test).
 */
function heldOff(rt: FleetRuntime, v: ReplicaView, adapter: AdapterRef | undefined, now: number): boolean {
  return adapter !== undefined && heldOffThere(v, adapter.name, rt.manager.backoff, now);
}

/** Decisions a cold request retakes because another router placed its adapter first. */
const MAX_PLACEMENT_ROUNDS = 3;

/** Names each placement claim in this process (with the node's lease prefix: in the fleet). */
let claims = 0;

/** A new name for one decision's share of a placement (`claims`, with the node's lease prefix). */
function nextClaimer(rt: FleetRuntime): string {
  return `${rt.leasePrefix}.${(claims = (claims + 1) % Number.MAX_SAFE_INTEGER).toString(36)}`;
}

/**
 * Thrown by an admission whose replica, up when the request was decided, was seen down while its
 * load ran or waited for room, or, decided down (every replica was), is still down with another
 * seen up since: the request is decided again on fresh views, as one that came now would be
 * ("once seen down, it gets no request", docs/reliability.md).
 */
export class SeenDown extends Error {
  constructor(readonly url: string) {
    super(`replica ${url} was seen down while the request's load ran`);
  }
}

export interface PlacementDeps {
  pipeline: SchedulingPipeline;
  /** The pipeline once a request waits for room anywhere (with the `room` filter). */
  roomPipeline: SchedulingPipeline;
  urls: string[];
  config: RouterConfig;
  eviction: EvictionPolicy;
  isStatic: (name: string) => boolean;
  /** Whether placement or eviction looks at the victims a cold load would evict. */
  weighsVictims: boolean;
}

export interface PlacementRequest {
  resolved: Resolved;
  adapter?: AdapterRef;
  prompt?: string;
  /** Estimated prompt + max tokens, for the replicas' context lengths. */
  contextTokens?: number;
  ctx: SchedulingContext;
  /** The replicas' views, without residents. */
  views: ReplicaView[];
  /** Where and how long this request waits for an adapter slot (`room_wait`). */
  wait: RoomWait;
  /**
   * Told each decision's replica as soon as it is taken (before any wait for room), and null when
   * the request is held in the gateway: in flight nowhere then.
   */
  decided?: (url: string | null) => void;
  /** The request's own lease, open already (its guessed lease, `redis` only). */
  ownLease?: () => LeaseHandle | undefined;
  /** LeaseHandle.viewsMark before `views` were read (absent: every lease of this process in them). */
  viewsMark?: number;
}

/**
 * Runs on the decision, claim held, with how long the load may wait for an idle adapter there and
 * how to claim the placement again before a load (`recheck`), or claim it first, for a decision on
 * a holder that took none (`placeHere`).
 */
type Admit<T> = (
  decision: Decision,
  queueTimeoutMs: number,
  recheck?: () => Promise<string>,
  placeHere?: () => Promise<string>,
) => T | Promise<T>;

/**
 * Where a request goes, agreed with the other routers on the fleet: schedule, and for a cold
 * adapter claim the placement, follow another router's placement, or spread past a saturated
 * one; wait for room anywhere as `room_wait` says (src/router/room-wait.ts). `admit` runs on
 * the decision, claim held, with how long the load may wait for an idle adapter there.
 */
export class Placement {
  constructor(private readonly deps: PlacementDeps) {}

  /** Places one request, on `rt`: the runtime its decision runs on from start to end. */
  async place<T>(rt: FleetRuntime, p: PlacementRequest, admit: Admit<T>): Promise<T> {
    // Held for a replica without its adapter, a request wants a slot there; waiting for room
    // anywhere, on any replica: a prefetch takes none of those until it is placed
    // (src/adapters/room-wants.ts). Not dropped when it goes: its load has not claimed the slot
    // yet. Made on the first wait: most requests never wait.
    let wanting: Wanting | undefined;
    /** Ends this decision's count as joining its replica (in-flight-here.ts), once its lease is open or it is decided again. */
    let joined: (() => void) | undefined;
    try {
      const { resolved, adapter, prompt, contextTokens, ctx, wait } = p;
      let views = p.views;
      /** Before `views` were read: this process's leases answered since may be missing from them (in-flight-here.ts). */
      let viewsMark = p.viewsMark ?? Infinity;
      /** Reads the views again, marking first what this process's leases they may miss. */
      const reread = (residents: boolean): Promise<ReplicaView[]> => {
        viewsMark = LeaseHandle.viewsMark();
        return rt.store.views(this.deps.urls, adapter, residents);
      };
      // Residents (the victims a cold load could evict) are read only once a decision needs a
      // load and the configuration weighs victims: a resident adapter's request never pays for them.
      const weighsVictims =
        resolved.kind === 'on-demand' && ctx.policy.maxLoadedAdapters > 0 && this.deps.weighsVictims;
      let withResidents = false;
      let placementRounds = 0;
      /** Another router's placement of this cold adapter, once a claim lost to it: follow it. */
      let follow: string | undefined;
      let held = false;
      /** Decisions retaken because their replica was seen down while the load ran. */
      let downRounds = 0;
      for (;;) {
        // Replaced meanwhile (a `redis` record change): health as the runtime polling now sees it.
        if (rt.successor) views = await withPolledHealth(rt, views);
        ctx.now = rt.clock.now();
        if (withResidents) this.weighVictims(rt, ctx, views);
        // From here to the claim nothing awaits: the next request sees this one's placement.
        if (adapter) {
          rt.manager.overlayClaims(views, adapter.name);
          // This node's own unloads under way read `unloading`, as the store's entry would.
          rt.manager.ownUnloads.overlay(views, adapter.name);
          this.markEvicted(rt, views, adapter.name);
        }
        // Never onto a replica seen down: a request could only fail there. Nor where its load would
        // be one this process holds off after a failure (`load-backoff`): decided among all, it goes
        // past that placement below.
        const followed =
          follow === undefined
            ? []
            : views.filter(
                (v) => v.url === follow && v.health !== 'down' && !heldOff(rt, v, adapter, ctx.now),
              );
        const pipeline = wait.anywhere ? this.deps.roomPipeline : this.deps.pipeline;
        const want = { kind: resolved.kind, adapter, prompt, contextTokens };
        let decision = followed.length > 0 ? pipeline.schedule(want, followed, ctx) : null;
        // The placement's replica cannot serve this request (a context longer than its own): decide
        // among all, and load a copy past the placement rather than refuse.
        const past = followed.length > 0 && !decision ? follow : undefined;
        decision ??= pipeline.schedule(want, views, ctx);
        if (!decision) throw errors.noReplica(adapter ? `adapter '${adapter.name}'` : 'the base model');
        p.decided?.(decision.replica.url);
        // Every replica predicted past `ttft_slo_ms`: wait here for one that is not (room-wait.ts `holds`).
        // A class bounded by `max_in_flight` judges the replica's in-flight count with this
        // process's requests decided meanwhile (in-flight-here.ts), not the views' snapshot alone.
        const r = decision.replica;
        r.stallsMs = stallsOf(r, ctx);
        const judged = wait.boundsInFlight
          ? {
              ttftMs: r.ttftMs,
              ownMs: r.ownMs,
              fixedMs: r.fixedMs,
              loadMs: r.loadMs,
              stallsMs: r.stallsMs,
              inFlight: inFlightHere(rt, r.url, r.inFlight, p.ownLease?.(), viewsMark, r.ownInFlight),
            }
          : r;
        if (wait.holds(ctx.now, judged)) {
          if (!held) rt.metrics.ttftHolds.inc();
          held = true;
          p.decided?.(null);
          // Held for its best start: on a replica holding its adapter it wants no slot; on another,
          // the slot it goes for there once the queues drain.
          if (decision.replica.holder) wanting?.off();
          else (wanting ??= this.wanting(rt, p)).on([decision.replica.url]);
          await rt.manager.waitForRoom();
          views = await reread(withResidents);
          continue;
        }
        joined = joinUnderWay(rt, decision.replica.url, p.ownLease?.());
        const cold = resolved.kind === 'on-demand' && !decision.replica.holder;
        // A holder only by placement (nobody is loading it there yet) needs the shared placement
        // too: another node may have placed the adapter elsewhere meanwhile.
        const presence = decision.replica.adapter;
        const claim =
          cold || (resolved.kind === 'on-demand' && (presence?.placed || presence?.claimed))
            ? resolved.adapter.name
            : undefined;
        if (cold && weighsVictims && !withResidents) {
          joined();
          withResidents = true;
          views = await reread(true);
          continue;
        }
        if (cold && withResidents && loadCost(decision.replica, ctx) === undefined) {
          // The chosen replica cannot load now and its wait is over: decide again among those that can.
          if (wait.escalateNow(ctx.now)) {
            joined();
            continue;
          }
          // No replica can start the load now (every adapter busy everywhere): wait for room
          // anywhere, rather than queue behind one replica's busy adapters.
          if (wait.anywhere && ctx.now < wait.deadline) {
            joined();
            (wanting ??= this.wanting(rt, p)).on();
            await rt.manager.waitForRoom();
            views = await reread(withResidents);
            continue;
          }
        }
        const url = decision.replica.url;
        const ttl = this.deps.config.queue_timeout_ms + this.deps.config.load_timeout_ms;
        let recheck: (() => Promise<string>) | undefined;
        /** This decision's share of the placement: giving it back leaves others' loads under it. */
        let claimer = '';
        // Decided on a holder: no placement. Should its lease find the adapter gone or going there,
        // the load it makes is a cold one and claims the placement first (seed 1004317).
        let placedHere = false;
        const unplaced = resolved.kind === 'on-demand' && !claim ? resolved.adapter.name : undefined;
        const placeHere =
          unplaced !== undefined
            ? () => {
                placedHere = true;
                claimer ||= nextClaimer(rt);
                return rt.store.claimPlacement(unplaced, url, undefined, rt.clock.now(), ttl, claimer);
              }
            : undefined;
        if (claim) {
          claimer = nextClaimer(rt);
          rt.manager.claim(url, claim);
          // Routers sharing the store (other Kong nodes) must agree where a cold adapter goes,
          // or each loads it on the replica it picked.
          let placedOn = await rt.store.claimPlacement(
            claim,
            url,
            past ?? this.spreading(cold, views, ctx, decision.replica.ttftMs),
            ctx.now,
            ttl,
            claimer,
          );
          // Placed on a replica seen down (by a node that saw it up, or this request's own claim
          // whose release is still on its way): overridden, not followed (seed 101079). So is a
          // placement where this process holds the adapter's load off after a failure: its request
          // would be refused there (503 adapter_load_backoff) while this replica can serve it (not
          // when this one holds it off too: every candidate did, and it is refused here).
          const placedView = placedOn !== url ? views.find((v) => v.url === placedOn) : undefined;
          if (
            placedView &&
            (placedView.health === 'down' ||
              (heldOff(rt, placedView, adapter, ctx.now) && !heldOff(rt, decision.replica, adapter, ctx.now)))
          )
            placedOn = await rt.store.claimPlacement(claim, url, placedOn, ctx.now, ttl, claimer);
          if (placedOn !== url && ++placementRounds <= MAX_PLACEMENT_ROUNDS) {
            // Placed elsewhere first: go there too (if it is one of ours), with fresh views.
            joined();
            rt.manager.unclaim(url, claim);
            if (this.deps.urls.includes(placedOn)) follow = placedOn;
            views = await reread(withResidents);
            continue;
          }
          // Ours: a load that waits for room claims it again first (the claim may be lost meanwhile).
          if (placedOn === url && placementRounds < MAX_PLACEMENT_ROUNDS)
            recheck = () => rt.store.claimPlacement(claim, url, undefined, rt.clock.now(), ttl, claimer);
        }
        /** Where another node placed the adapter while this decision's load waited for room. */
        let placedElsewhere: string | undefined;
        try {
          // Its lease opens as admission begins (admission.ts `takeLease`, before any await).
          joined();
          // Admitted in the call when nothing is to wait for (admission.ts `admit`): no await then.
          const admitted = admit(decision, wait.loadQueueMs(rt.clock.now()), recheck, placeHere);
          return admitted instanceof Promise ? await admitted : admitted;
        } catch (err) {
          if (err instanceof PlacedElsewhere) {
            placementRounds++;
            placedElsewhere = err.url;
          } else if (err instanceof SeenDown) {
            // Each round needs a replica decided up and seen down after, or decided down and
            // another seen up after: bounded by the replicas.
            if (++downRounds > this.deps.urls.length)
              throw errors.noReplica(adapter ? `adapter '${adapter.name}'` : 'the base model');
          } else if (!wait.escalate(err, rt.clock.now())) throw err;
        } finally {
          if (claim) rt.manager.unclaim(url, claim);
          const placed = claim ?? (placedHere ? unplaced : undefined);
          if (placed)
            rt.store
              .releasePlacement(placed, url, claimer)
              .catch((err: Error) => rt.log.warn(`could not release placement: ${err.message}`));
        }
        // Placed elsewhere meanwhile: go there too. No room on the chosen replica in time: look
        // for room anywhere. With fresh views, either way.
        follow =
          placedElsewhere !== undefined && this.deps.urls.includes(placedElsewhere)
            ? placedElsewhere
            : undefined;
        views = await reread(withResidents);
      }
    } finally {
      joined?.();
      wanting?.off();
    }
  }

  /** A request's want of room, for prefetching to leave alone (`place`). */
  private wanting(rt: FleetRuntime, p: PlacementRequest): Wanting {
    const adapter = p.resolved.kind === 'on-demand' ? p.resolved.adapter.name : undefined;
    return new Wanting(rt.manager.roomWants, adapter, this.deps.urls);
  }

  /**
   * The placement a cold decision overrides on purpose: the adapter's placed replica is up,
   * fresh and saturated, so the rule spreads the adapter to a second replica. A placed replica
   * this router merely cannot judge (no fresh poll yet) is followed, not overridden. Under
   * predicted saturation, saturated means predicted slower than the chosen one by the margin.
   */
  private spreading(
    cold: boolean,
    views: ReplicaView[],
    ctx: SchedulingContext,
    chosenTtftMs: number,
  ): string | undefined {
    const placed = cold ? views.find((v) => v.adapter?.placed) : undefined;
    if (!placed) return undefined;
    const c = toCandidate(placed, ctx);
    const saturated =
      ctx.policy.saturationMode === 'predicted'
        ? c.ttftMs > chosenTtftMs + (ctx.policy.saturationMarginMs ?? 0)
        : c.saturation >= 1;
    return c.health === 'up' && !c.stale && saturated ? c.url : undefined;
  }

  /** Registered holders whose reported residency (newer vLLM) lacks the adapter's weights. */
  private markEvicted(rt: FleetRuntime, views: ReplicaView[], name: string): void {
    for (const v of views) {
      const held = rt.poller.lastLoad.get(v.url)?.residency?.cpu;
      if (held && v.adapter?.state === 'loaded' && !held.includes(name)) v.adapter.evicted = true;
    }
  }

  /**
   * Gives placement and eviction what they weigh: the configured policy's cost of each possible
   * victim, from decayed request frequency and how many replicas hold a copy.
   */
  private weighVictims(rt: FleetRuntime, ctx: SchedulingContext, views: ReplicaView[]): void {
    const copies = new Map<string, number>();
    for (const v of views)
      for (const r of v.residents ?? [])
        if (r.state !== 'unloading') copies.set(r.name, (copies.get(r.name) ?? 0) + 1);
    const now = ctx.now;
    const stats = rt.adapterStats;
    const victimCtx = {
      now,
      frequency: (n: string) => stats.frequency(n, now),
      copies: (n: string) => copies.get(n) ?? 1,
    };
    const policy = this.deps.eviction;
    ctx.victimCost = (v) => policy.cost(v, victimCtx);
    ctx.isStatic = this.deps.isStatic;
  }
}
