/**
 * What the `max_in_flight` check (dst/bound-check.ts) reads: each request's hold ends in the real
 * code (RoomWait `holds` answering false: the decision it goes on, in the order they came), the
 * requests Kong sent to each replica and when the replica answered each. The hold ends are an
 * event of the decision, not a count the router keeps: what a decision counted is never read.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Candidate } from '../src/scheduler/types';
import { idleAdapterWaitMs, RoomWait } from '../src/router/room-wait';
import type { FleetRuntime } from '../src/runtime';
import { joinedPastBound, leaseAgedOut, type BoundDecision, type Flight } from './bound-check';

/** Told of each `holds` call of the request whose access phase runs: held (true), going (false) or refused. */
type HoldsSeen = (wait: RoomWait, nodeNow: number, decided: HoldInput, held: boolean | 'refused') => void;

/** What a `holds` call is given of the replica it would send to. */
type HoldInput = Partial<Pick<Candidate, 'inFlight' | 'ttftMs' | 'loadMs' | 'fixedMs'>>;

/**
 * The start the decision predicted where it went, as aging counts it (src/router/room-wait.ts
 * `holds`: its predicted TTFT less the wait for an idle adapter), when its class ages (behind a
 * higher one, predicted); else undefined. The rule is the prediction's, so the check reads it:
 * what is judged is that a request joined at its bound only once its wait and this start reached
 * half its objective.
 */
function agingStartMs(wait: RoomWait, decided: HoldInput): number | undefined {
  if (!(wait as unknown as { behindHigher: boolean }).behindHigher) return undefined;
  if (decided.ttftMs === undefined || decided.fixedMs === undefined) return undefined;
  return decided.ttftMs - idleAdapterWaitMs({ ...decided, fixedMs: decided.fixedMs });
}

const seen = new AsyncLocalStorage<HoldsSeen>();
let wrapped = false;

/** Wraps RoomWait's `holds` once per module registry: it tells the running request's watcher, then answers as before. */
function wrapHolds(): void {
  if (wrapped) return;
  wrapped = true;
  const proto = RoomWait.prototype as unknown as {
    holds: (this: RoomWait, now: number, decided: HoldInput) => boolean;
  };
  const holds = proto.holds;
  proto.holds = function (now, decided) {
    const tell = seen.getStore();
    let held: boolean;
    try {
      held = holds.call(this, now, decided);
    } catch (err) {
      tell?.(this, now, decided, 'refused');
      throw err;
    }
    tell?.(this, now, decided, held);
    return held;
  };
}

/** What the watch reads of the world at a hold's end. */
export interface BoundGround {
  now(): number;
  degraded(): boolean;
  lastFaultAt(): number;
  /** Processes alive now. */
  live(): ReadonlySet<string>;
  /** When runtime `rt` was last seen deciding alone after a step (-Infinity: never). */
  localAt(rt: FleetRuntime): number;
  /** When state `db` reclaimed lease `id` by age (undefined: never), and whether it holds it now. */
  expiredAt(db: number, id: string): number | undefined;
  holdsLease(db: number, id: string): boolean;
}

/** A request's hold calls so far. */
interface Holds {
  arrivedAt: number;
  /** Its class's bound (0: none) and objective. */
  bound: number;
  objectiveMs: number;
  /** The last hold end and any hold call: their order (-1: none). */
  lastGoSeq: number;
  lastCallSeq: number;
  /** The last hold end: when, its wait on its node's clock, and when its views were read at the earliest. */
  go?: {
    at: number;
    waitedMs: number;
    agingStartMs: number | undefined;
    viewsFrom: number;
    live: ReadonlySet<string>;
    degraded: boolean;
    lastFaultAt: number;
  };
  /** When it was last held (its views read again after). */
  heldAt?: number;
  /** Sent, or its decision ended (answered, refused, its process died). */
  sent: boolean;
  ended: boolean;
}

export class BoundWatch {
  readonly flights: Flight[] = [];
  private readonly holds = new Map<number, Holds>();
  private seq = 0;
  /** Decisions sent, to judge once every decision before them is sent or over. */
  private judging: BoundDecision[] = [];
  /** Hold calls that held a bounded request at its bound (the router's own count: coverage only). */
  boundWaits = 0;

  constructor(private readonly g: BoundGround) {
    wrapHolds();
  }

  /** Runs `route` (request `request`'s access phase) with its hold calls watched. */
  watch<T>(request: number, bound: number, objectiveMs: number, route: () => Promise<T>): Promise<T> {
    const h: Holds = {
      arrivedAt: this.g.now(),
      bound,
      objectiveMs,
      lastGoSeq: -1,
      lastCallSeq: -1,
      sent: false,
      ended: false,
    };
    this.holds.set(request, h);
    return seen.run((wait, nodeNow, decided, held) => {
      const inFlight = decided.inFlight;
      const seq = this.seq++;
      h.lastCallSeq = seq;
      const waitedMs = nodeNow - wait.started;
      if (held === true) {
        h.heldAt = this.g.now();
        const start = agingStartMs(wait, decided);
        const aged = start !== undefined && waitedMs + start >= h.objectiveMs / 2;
        if (h.bound > 0 && (inFlight ?? 0) >= h.bound && waitedMs < h.objectiveMs / 2 && !aged)
          this.boundWaits++;
      }
      if (held !== false) return;
      h.lastGoSeq = seq;
      if (h.bound === 0) return;
      h.go = {
        at: this.g.now(),
        waitedMs,
        agingStartMs: agingStartMs(wait, decided),
        viewsFrom: h.heldAt ?? h.arrivedAt,
        live: this.g.live(),
        degraded: this.g.degraded(),
        lastFaultAt: this.g.lastFaultAt(),
      };
    }, route);
  }

  /** Request `request`'s decision ended without its being sent (or its process died). */
  ended(request: number): void {
    const h = this.holds.get(request);
    if (h) h.ended = true;
  }

  /**
   * Request `request` was sent to `url` by `decider`'s process `proc`; `alone`: its router decided
   * alone when it did. Returns the flight, whose `doneAt` the caller sets when the replica answers.
   */
  sent(
    request: number,
    url: string,
    decider: FleetRuntime,
    proc: string,
    db: number,
    alone: boolean,
    lease?: string,
  ): Flight {
    const h = this.holds.get(request);
    const at = this.g.now();
    const arrivedAt = h?.arrivedAt ?? at;
    const decided = h && h.lastGoSeq >= 0 && h.lastGoSeq === h.lastCallSeq ? h.lastGoSeq : undefined;
    const f: Flight = {
      request,
      url,
      decider,
      proc,
      db,
      arrivedAt,
      sentAt: at,
      alone: alone || this.g.localAt(decider) >= arrivedAt,
      ...(decided === undefined ? {} : { decidedSeq: decided }),
      ...(lease === undefined ? {} : { lease }),
    };
    if (h) h.sent = true;
    if (h?.go && decided !== undefined)
      this.judging.push({
        request,
        seq: decided,
        at: h.go.at,
        viewsFrom: h.go.viewsFrom,
        waitedMs: h.go.waitedMs,
        ...(h.go.agingStartMs === undefined ? {} : { agingStartMs: h.go.agingStartMs }),
        bound: h.bound,
        objectiveMs: h.objectiveMs,
        url,
        decider,
        db,
        live: h.go.live,
        degraded: h.go.degraded,
        lastFaultAt: h.go.lastFaultAt,
        alone: this.g.localAt(decider) >= h.go.viewsFrom,
      });
    this.flights.push(f);
    return f;
  }

  /**
   * The decisions judged now (every decision before each sent or over): a violation's detail, or
   * undefined.
   */
  check(): string | undefined {
    if (this.judging.length === 0) return undefined;
    const open = [...this.holds.values()].filter(
      (h) => !h.sent && !h.ended && h.lastGoSeq >= 0 && h.lastGoSeq === h.lastCallSeq,
    );
    const left: BoundDecision[] = [];
    for (const d of this.judging) {
      if (open.some((h) => h.lastGoSeq < d.seq)) {
        left.push(d);
        continue;
      }
      const past = joinedPastBound(d, this.flights, (f, at) =>
        f.lease === undefined
          ? false
          : leaseAgedOut(f, this.g.expiredAt(f.db, f.lease), this.g.holdsLease(f.db, f.lease), at),
      );
      if (past !== undefined) return past;
    }
    this.judging = left;
    return undefined;
  }
}
