/**
 * Invariant (i)'s exemption, "no unload of a busy adapter": the window docs/reliability.md leaves
 * open ("An adapter someone unseen routes is held", not covered). A request routed by a router the
 * unloading runtime cannot see (no lease of it in that runtime's store) that reaches the engine
 * after the unloader asked the replica's word is left to chance, as the word said what ran when it
 * was written, unless the hold could have covered it.
 */

/** A request proxied to an adapter on a replica, as the busy-unload check sees it. */
export interface SentRequest {
  /** The plugin-server process that routed it (node and generation). */
  proc: string;
  /** Its process decided alone (Redis unreachable to it) when it was routed: no lease in Redis. */
  alone: boolean;
  /** The shared state (database) the runtime that routed it used. */
  db: number;
  at: number;
  /** When it reached the replica (Infinity until then: Kong's hop to it, slow on a slow path; absent: at `at`). */
  reached?: number;
  /** When the replica answered it (Infinity until then). */
  ended: number;
  /** The lease it was proxied on (its runtime's prefix, then its number). */
  lease?: string;
  /** Its lease is in no store the unloader reads now, and its router cannot take it again (`leaseLost`). */
  lost?: boolean;
  /**
   * When Kong logged 499 for it (its client gave up) and closed the upstream connection: its log
   * phase gave its lease back then, the last the plugin hears of it, though it may still be on its
   * way (a slow path) and reach the engine before the close does.
   */
  closed?: number;
}

/** The runtime that sent the unload: its process and the shared state it read. */
export interface Unloader {
  proc: string;
  /** It decided alone (its store degraded): it sees no other node's requests (exempt from (i)). */
  alone: boolean;
  db: number;
  /** When it last asked that replica's `/metrics` before the unload (its word). */
  wordAt: number;
  /**
   * When its store's grant of the unload answered it: the unload is in the shared state from then
   * on, so a rollback after it may lose the record before the replica drops the adapter.
   */
  grantAnsweredAt?: number;
  /**
   * Its runtime's `/metrics` reads of that replica answered so far (polls and words, oldest first):
   * what could have started its hold. Absent: any unseen request under way within the hold counts.
   */
  reads?: readonly Read[];
}

/** One `/metrics` read: when it was asked and answered (the replica wrote it in between). */
export interface Read {
  asked: number;
  answered: number;
}

/**
 * Whether a read of the unloader answered after `from` could have found `q` busy: under way at the
 * replica at some time between the read's asking and its answer, and no lease of the unloader's own
 * explained that reading (`ownLeaseExplains`). A request that starts and ends between two reads is not seen (docs/reliability.md, "An adapter someone unseen routes is held",
 * not covered; seed 72667: 320 ms between two polls 1 s apart).
 */
function heldBy(
  q: SentRequest,
  u: Unloader,
  from: number,
  now: number,
  sent: readonly SentRequest[],
): boolean {
  if (u.reads === undefined) return q.ended > from;
  // A read asked while its lease was open found it busy under that lease: no hold.
  const since = unseenFrom(q, u);
  return u.reads.some(
    (x) =>
      x.answered > from &&
      x.answered <= now &&
      x.asked <= q.ended &&
      x.answered >= arrival(q) &&
      x.asked >= since &&
      !ownLeaseExplains(sent, u, x),
  );
}

/**
 * Whether a request of the unloader's own process explains read `x` of the adapter busy, so the
 * read started no hold whatever else ran beside it: proxied (its lease taken) by the time the poll
 * began and not ended then, not closed by a 499 (its lease given back, no end told) by the read's
 * answer: its lease held since the poll began, or its end told since (`holdUnseenBusy`: a lease held
 * at least as long as the poll ran, or `endedHere`), whether it had reached the replica or not. The
 * word names the adapters, not how many requests of each (docs/reliability.md, "An adapter someone
 * unseen routes is held", not covered; seed 3044822). Another node's lease is not taken to explain
 * it: its release may land between the read and the judge's store read, which the check cannot date.
 */
function ownLeaseExplains(sent: readonly SentRequest[], u: Unloader, x: Read): boolean {
  return sent.some(
    (p) =>
      p.proc === u.proc &&
      !unseenBy(p, u) &&
      p.lease !== undefined &&
      p.at <= x.asked &&
      p.ended >= x.asked &&
      (p.closed ?? Infinity) > x.answered,
  );
}

/**
 * Whether the unloader could not see `r`'s lease: routed alone, lost by an emptied state its router
 * has not found since (`leaseLost`), or on another shared state by another process (a `redis`
 * record change reaching the nodes in turn: seed 37593). A process's own runtimes on other state
 * are asked before each unload (`leasedElsewhere`), so they are seen.
 */
export function unseenBy(r: SentRequest, u: Unloader): boolean {
  return r.alone || r.lost === true || (r.db !== u.db && r.proc !== u.proc);
}

/**
 * From when the unloader could not see `r`'s lease: always (`unseenBy`), from Kong's 499 (`closed`:
 * its log phase gave the lease back, and nothing of the plugin runs for it after), or never.
 */
function unseenFrom(r: SentRequest, u: Unloader): number {
  return unseenBy(r, u) ? -Infinity : (r.closed ?? Infinity);
}

/** What the shared state a request's lease was on, and the runtime that took it, say of it now. */
export interface LeaseNow {
  /** Times that state was emptied (a FLUSHALL, a restart empty or from an older copy, a lossy switch). */
  resets: readonly number[];
  /** The lease is open there. */
  open: boolean;
  /** The runtime that took it is alive and decides alone now (its store degraded). */
  routerAlone: boolean;
  /** When that runtime last registered its replicas there (a reclaim or a recovery, which take its leases again). */
  routerRegisteredAt?: number;
  /** The latest server time of a call whose reply told that runtime its state was lost (`RedisModel.foundLostAt`). */
  routerFoundAt?: number;
  /** When that runtime last ended a walk taking all its open leases again there (a reclaim's or a recovery's). */
  routerRetakenAt?: number;
  /** When that runtime's last reclaim ended its registration there: its walk over its leases was due at once. */
  routerWalkDueAt?: number;
  /** When that runtime last began a walk taking all its open leases again. */
  routerWalkBegunAt?: number;
  /** When the lease was last taken there (server time): before the emptying, the emptying lost it. */
  takenAt?: number;
}

/**
 * Whether request `r`, still on its way, holds its adapter no more because the expiry reclaimed its
 * lease by age on the wire (`expiredAt`, server time; `open`: the unloader's state holds the lease
 * now). Not a lease reclaimed before `r` was proxied (the router's own check takes a fresh one past
 * half the max age: seed 102923), nor one its router took again since (an emptied state forgot the
 * reclaim): either holds the adapter in the router's word, and an unload under it is a break.
 */
export function agedOut(r: SentRequest, expiredAt: number | undefined, open: boolean, now: number): boolean {
  return r.lease !== undefined && expiredAt !== undefined && expiredAt > r.at && expiredAt <= now && !open;
}

/**
 * Whether `r`'s lease counts nowhere the unloader reads, with its router unable to help it: that
 * state was emptied after the lease was taken there (`takenAt`; else after `r` was proxied), the
 * lease is not open there, the runtime that took it decides alone now (cut off from Redis, it
 * finds the emptied state, or takes its leases again, only once its probe recovers), and either
 * - it has not registered there since (a reclaim or a recovery would have taken it again) and has
 *   had no reply from the emptied state telling it so (docs/reliability.md, "Every node notices an
 *   emptied Redis", not covered; seed 844981: its heartbeats' replies came past its timeout through
 *   the grace), or
 * - it registered again since but was cut off before its walk taking its leases again ended
 *   (`routerRetakenAt`): a call of the walk (one per RETAKE_BATCH leases) timed out before it reached
 *   the server, or the link broke between the registration and the walk (seed 72667, when the walk
 *   was one call per lease: the FLUSHALL found at 732 ms, the replicas registered and 2 of 4 leases
 *   taken again, its link slow past its timeout from 887 ms; now its one call takes all 4). Not a reclaim whose
 *   registration ended and whose walk never began (`routerWalkDueAt`): it had the state to take
 *   them on, and went on without (review4: a reclaim that skipped its walk, its next call cut off,
 *   passed without this); nor a walk that ended before a later call was cut off.
 * A lease left uncounted by a router that ended taking its leases again since, or lost with no
 * reset, is the stores' break (seeds 609813, 14963) and stays one; so is one whose router was told
 * of the emptying and cut off only after without beginning to take them again: it had the state to
 * take its leases again on (a node ignoring an emptied state, cut off 0.5 s after finding it,
 * passed as a false alarm without this).
 */
export function leaseLost(r: SentRequest, l: LeaseNow): boolean {
  const emptied = Math.max(-Infinity, ...l.resets);
  const registered = (l.routerRegisteredAt ?? -Infinity) >= emptied;
  const untold = !registered && (l.routerFoundAt ?? -Infinity) < emptied;
  const due = l.routerWalkDueAt ?? -Infinity;
  const walkSkipped = due >= emptied && (l.routerWalkBegunAt ?? -Infinity) < due;
  const cutMidway = registered && (l.routerRetakenAt ?? -Infinity) < emptied && !walkSkipped;
  return emptied > (l.takenAt ?? r.at) && !l.open && l.routerAlone && (untold || cutMidway);
}

/** When `r` reached the replica (Kong's hop to it: at once but on a slow path; Infinity while on its way). */
function arrival(r: SentRequest): number {
  return r.reached ?? r.at;
}

/**
 * Whether every request under way (`ended >= now`) on the adapter there is an unseen router's
 * first: unseen by the unloader when it asked its word (its lease in no store it reads, or given
 * back at a 499 before: seed 2426103, a request Kong closed on a slow path reaching the engine ahead
 * of its close), reaching the replica after that word (or not yet: a request on its way is in no
 * word), with no request of that process it could not see under way at the replica when a read of
 * the unloader's answered in the `holdMs` before was written (whose busy reading with no lease
 * explaining it would have held the adapter). Any other busy unload breaks (i).
 */
export function unseenFirst(sent: SentRequest[], u: Unloader, now: number, holdMs: number): boolean {
  const open = sent.filter((r) => r.ended >= now);
  return (
    open.length > 0 &&
    open.every(
      (r) =>
        unseenFrom(r, u) <= u.wordAt &&
        arrival(r) >= u.wordAt &&
        !sent.some(
          (q) =>
            q !== r &&
            q.proc === r.proc &&
            unseenFrom(q, u) < Infinity &&
            arrival(q) < Math.min(arrival(r), now) &&
            heldBy(q, u, Math.min(arrival(r), now) - holdMs, now, sent),
        ),
    )
  );
}
