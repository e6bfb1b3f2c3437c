import { Lru } from '../lru';
import type { ReplicaApi } from '../backends/replica-api';
import { monotonic, type Clock } from '../clock';
import type { Logger } from '../log';

/**
 * An unload the replica's word stopped: it reported the adapter busy, did not answer, or its
 * idle word came back too late to act on (stale).
 */
export interface Withheld {
  url: string;
  adapter: string;
  reason: 'busy' | 'unreachable' | 'stale';
}

/**
 * How old the replica's idle word may be (from asking to the unload call) for the unload to go
 * out. The word says what ran when the replica wrote its answer; a request routed by a node that
 * does not see this unload (one deciding alone after a partition, or on a store just emptied)
 * can reach the engine unseen until the unload lands. Leases close that window among nodes that
 * share a store; this bounds it for the others. Loopback and LAN scrapes take a few ms.
 */
export const FRESH_WORD_MS = 150;
/** The replica's report of what runs, or why it could not be read. */
type Activity = { busy?: string[] } | { failed: Error };

/** Asks before one unload: a slow answer is asked again once, then the unload is withheld. */
export const FRESH_WORD_ASKS = 2;

/**
 * How long an adapter the replica reported busy while no lease held it here stays withheld from
 * unloads, however idle it reads meanwhile. Its requests come from a router this node cannot see
 * (one deciding alone after a partition, or on a store just emptied), which keeps sending them:
 * an idle word read between two of them is followed by the next within the window the fresh word
 * leaves (the fault run at c170734 broke (i) twice so, 0.4-0.6 s after a busy word). Two probe
 * intervals, as a node back from an outage holds off its unloads: the time for that router to
 * find the shared state again, after which its requests take leases.
 */
export const UNSEEN_HOLD_MS = 2000;

/** The key of a replica and an adapter in the maps below. */
const pairKey = (url: string, adapter: string): string => `${url}\u0000${adapter}`;

/** At most one log line per replica and adapter this often: a waiting caller retries every 250 ms. */
const LOG_EVERY_MS = 10_000;
/** Least bound on the replica's word right after a load (it may be the poll's timeout, 500 ms). */
const AFTER_LOAD_READ_MS = 2000;

/**
 * How many of this node's last served requests per replica and adapter the word keeps for a poll's
 * judge (`servedEndedSince`): more end within one poll only under heavy traffic, when a lease of
 * the adapter is likely open across the poll anyway; one dropped holds what the reading saw.
 */
const SERVED_SPANS = 8;

/**
 * The replica's own word before an unload: a fresh read of what it runs (vLLM's
 * `lora_requests_info`), never the last poll. Leases can be wrong after a partition, an expired
 * lease or an emptied store; the replica knows what it is running.
 */
export class ReplicaWord {
  /** Bound on the fresh read (the runtime sets the poller's timeout). */
  timeoutMs: () => number = () => 1000;
  /** How old an idle word may be when the unload goes out (FRESH_WORD_MS). */
  freshMs = FRESH_WORD_MS;
  /**
   * Whether a registry entry the store does not know could have been loaded by a router (the
   * poller's classifier): others are the replica's start-up adapters, which hold no slot.
   */
  isManaged: ((name: string, path: string) => boolean) | null = null;
  /** Told when the replica holds adapters the store does not know, so a poll adopts them soon. */
  onUnknownResidents: ((url: string) => void) | null = null;
  private readonly listeners: ((w: Withheld) => void)[] = [];
  private readonly logged = new Lru<string, number>(1024);
  /**
   * Replica and adapter → when the replica last reported it busy with no lease here
   * (UNSEEN_HOLD_MS), on the monotonic time line: the hold is a duration, and a wall clock stepped
   * ahead ended it early, stepped back past it at once (review 65). Kept in the order the holds
   * began (a renewal moves to the end), those past the hold dropped from the front as new ones
   * start: no bound drops a live one (an Lru of 1024 did, with more pairs read busy within the
   * hold: a store just emptied, 65 replicas running 16 adapters each). What it keeps is what
   * reads found busy within the last 2 s: at most each replica's adapters.
   */
  private readonly unseen = new Map<string, number>();
  /**
   * Replica and adapter → when the last SERVED_SPANS requests of this node routed there were
   * opened and ended (their lease taken, their log phase), on the monotonic time line: a poll
   * begun between may have read one running (`servedEndedSince`). Past 1024 pairs the oldest go,
   * past SERVED_SPANS spans the earliest ended: a poll then holds what it read (the safe side).
   */
  private readonly servedEnds = new Lru<string, { opened: number; ended: number }[]>(1024);

  constructor(
    private readonly api: ReplicaApi,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {}

  /** Adds a listener told whenever an unload is withheld (metrics); the others keep theirs. */
  addWithheldListener(fn: (w: Withheld) => void): void {
    this.listeners.push(fn);
  }

  /**
   * Whether the replica withholds the unload of `name`: 'busy' if it reports it running or
   * waiting, 'unreachable' if it did not answer; undefined to go ahead (idle by its report, or a
   * replica that cannot say, where the lease rules alone decide). Adds every adapter it reports
   * busy to `reportedBusy`.
   */
  private async withholds(
    url: string,
    name: string,
    reportedBusy: Set<string>,
    timeoutMs: number,
    answer?: Promise<Activity>,
  ): Promise<Withheld['reason'] | undefined> {
    if (!this.api.activity) return undefined;
    const got = await (answer ?? this.ask(url, name, timeoutMs));
    if ('failed' in got) {
      this.withheld({ url, adapter: name, reason: 'unreachable' }, got.failed.message);
      return 'unreachable';
    }
    const busy = got.busy;
    if (busy === undefined) return undefined;
    for (const a of busy) reportedBusy.add(a);
    const key = pairKey(url, name);
    const now = monotonic(this.clock);
    if (busy.includes(name)) {
      this.holdUnseen(url, name, now);
      this.withheld(
        { url, adapter: name, reason: 'busy' },
        'the replica reports requests of it running or waiting, though no lease holds it here',
      );
      return 'busy';
    }
    // Never negative on a monotonic time line. A clock with none (`now` stands for it) stepped
    // back by less than the hold counts as within it; by more, it holds no longer (not for good).
    const since = now - (this.unseen.get(key) ?? -Infinity);
    if (Math.abs(since) >= UNSEEN_HOLD_MS) return undefined;
    this.withheld(
      { url, adapter: name, reason: 'busy' },
      `the replica reported requests of it ${Math.round(Math.max(0, since))} ms ago with no lease here: a router this node cannot see sends them (held ${UNSEEN_HOLD_MS} ms)`,
    );
    return 'busy';
  }

  /**
   * Starts (or renews) the unseen hold of `adapter` on `url` (UNSEEN_HOLD_MS): a read of this node
   * (the unload's word, or a poll) found it running or waiting with no lease here at `at`
   * (monotonic).
   */
  holdUnseen(url: string, adapter: string, at = monotonic(this.clock)): void {
    const key = pairKey(url, adapter);
    // Moved to the end: the front holds the oldest, the first to end.
    this.unseen.delete(key);
    this.unseen.set(key, at);
    // A fresh iterator each time (none held: src/lru.ts says what one kept); stops at the first
    // live hold, so only holds past their 2 s go (read as `withholds` reads them).
    for (const [k, since] of this.unseen) {
      if (Math.abs(at - since) < UNSEEN_HOLD_MS) break;
      this.unseen.delete(k);
    }
  }

  /** Whether an unseen hold on `url` is within its time (at `now`, monotonic): a router this node cannot see may be on it. */
  holding(url: string, now = monotonic(this.clock)): boolean {
    const prefix = `${url}\u0000`;
    for (const [k, since] of this.unseen)
      if (k.startsWith(prefix) && Math.abs(now - since) < UNSEEN_HOLD_MS) return true;
    return false;
  }

  /**
   * Drops every pair of `url` (a replica that left; `holding` false): the holds past their time
   * stayed until a later hold began (dst/process-audit.ts, seed 3120343), and the served spans and
   * logged pairs, though bounded, name it no longer.
   */
  forget(url: string): void {
    const prefix = `${url}\u0000`;
    for (const k of [...this.unseen.keys()]) if (k.startsWith(prefix)) this.unseen.delete(k);
    for (const [k] of this.servedEnds.entries()) if (k.startsWith(prefix)) this.servedEnds.delete(k);
    for (const [k] of this.logged.entries()) if (k.startsWith(prefix)) this.logged.delete(k);
  }

  /** How many replica-adapter pairs the unseen hold keeps (tests: only those within it). */
  unseenHeld(): number {
    return this.unseen.size;
  }

  /**
   * A request of this node routed to `adapter` on `url` ended (its log phase, not a lease given back
   * unused), at `at` on the monotonic clock: its log phase's start, when told after a round trip (a
   * poll begun meanwhile cannot have read it running). `opened`: when its lease was taken, on the
   * same time line (a poll begun before may have read the replica before it came).
   */
  servedEnded(url: string, adapter: string, at = monotonic(this.clock), opened = -Infinity): void {
    const key = pairKey(url, adapter);
    const spans = this.servedEnds.peek(key) ?? [];
    spans.push({ opened, ended: at });
    if (spans.length > SERVED_SPANS) {
      let first = 0;
      for (let i = 1; i < spans.length; i++) if (spans[i]!.ended < spans[first]!.ended) first = i;
      spans.splice(first, 1);
    }
    this.servedEnds.set(key, spans);
  }

  /**
   * Whether a request of this node routed to `adapter` on `url` was open when a poll began at
   * `startedMono` (monotonic) and ended at or after it: a reading begun then may have seen it
   * running. One opened after the poll began excuses nothing, as a lease taken then (unseen-busy.ts):
   * the replica may have written its reading before it came. This node's own word on its own
   * clock: a lease's release in the store says less (another node's, stamped by that node's clock;
   * one given back unused; a touch with no lease at all): review 64.
   */
  servedEndedSince(url: string, adapter: string, startedMono: number): boolean {
    const spans = this.servedEnds.peek(pairKey(url, adapter)) ?? [];
    return spans.some((s) => s.opened <= startedMono && s.ended >= startedMono);
  }

  /**
   * What the replica reports running or waiting (`busy` undefined: it cannot say), `name` among it
   * whenever the report may be naming it; never rejects.
   */
  private async ask(url: string, name: string, timeoutMs: number): Promise<Activity> {
    try {
      return { busy: (await this.api.activity!(url, timeoutMs, [name])).busy };
    } catch (err) {
      return { failed: err as Error };
    }
  }

  /**
   * The replica's word right before an unload of `name`, fresh enough to act on: undefined to
   * unload now (no await may come between this and the unload call), else why not: 'busy',
   * 'unreachable', 'stale' (the idle word took longer than `freshMs` from asking, twice, or
   * until `askUntil` on the clock when given), or
   * 'lost' when `stillOurs` (checked after each answer) says the caller's lock is gone. Every
   * wait between the replica writing its answer and the unload (a slow network, a busy router
   * process) is time in which a request routed by a node that does not see this unload reaches
   * the engine unseen.
   */
  async idleNow(
    url: string,
    name: string,
    reportedBusy: Set<string>,
    timeoutMs = this.timeoutMs(),
    stillOurs?: () => boolean,
    /**
     * An answer already asked for (the after-load check asks with the list), as the first ask;
     * `askedAt` and `askUntil` on the monotonic time line (`monotonic`).
     */
    first?: { answer: Promise<Activity>; askedAt: number },
    askUntil?: number,
  ): Promise<Withheld['reason'] | 'lost' | undefined> {
    let age = 0;
    // The word's age on the monotonic time line: a wall clock stepped back during the ask (a skew
    // correction) by less than the answer took made an old word read fresh (review 65).
    const now = () => monotonic(this.clock);
    for (let ask = 0; ask < FRESH_WORD_ASKS || now() < (askUntil ?? -Infinity); ask++) {
      const asked = ask === 0 ? first : undefined;
      const askedAt = asked?.askedAt ?? now();
      const reason = await this.withholds(url, name, reportedBusy, timeoutMs, asked?.answer);
      if (reason) return reason;
      if (stillOurs && !stillOurs()) return 'lost';
      age = now() - askedAt;
      // A clock with no monotonic time line stepped back could hide an old word: not fresh either.
      if (age >= 0 && age <= this.freshMs) return undefined;
    }
    this.withheld(
      { url, adapter: name, reason: 'stale' },
      `its word that the adapter is idle took ${Math.round(age)} ms to act on (at most ${this.freshMs})`,
    );
    return 'stale';
  }

  /**
   * The replica's own list read afresh, bounded by `leftMs`: `name`'s entry, null when it is not
   * listed, undefined when the replica cannot say (no list, no answer in time).
   */
  private async entryNow(
    url: string,
    name: string,
    leftMs: number,
  ): Promise<{ name: string; path: string } | null | undefined> {
    if (!this.api.residency || leftMs <= 0) return undefined;
    try {
      const entries = await this.api.residency(url, Math.min(this.timeoutMs(), leftMs));
      return entries === undefined ? undefined : (entries.find((x) => x.name === name) ?? null);
    } catch {
      return undefined;
    }
  }

  /** Whether `e` is listed at a path no configuration loads (registered at the replica's start, `--lora-modules`). */
  private startUpEntry(e: { name: string; path: string }): boolean {
    return !!this.isManaged && !this.isManaged(e.name, e.path);
  }

  /**
   * After a load answered "already loaded": whether the replica's own list gives `name` a path no
   * configuration loads (registered at its start, `--lora-modules`): a start-up adapter a name
   * pattern also matched, not a router's load. False when it cannot say (no configurations known,
   * no list, no answer in time): the answer stands as a router's load, as before.
   */
  async registeredAtStart(url: string, name: string, leftMs = Infinity): Promise<boolean> {
    if (!this.isManaged) return false;
    const e = await this.entryNow(url, name, leftMs);
    return !!e && this.startUpEntry(e);
  }

  /**
   * After a load call that failed: whether the replica lists `name` now (its `/v1/models`, read
   * afresh), and if so whether at a path no configuration loads ('start-up': registered at its
   * start, `--lora-modules`, not this load landing; dst seed 310213). Undefined when it cannot say.
   */
  async listedAfterLoad(
    url: string,
    name: string,
    leftMs = Infinity,
  ): Promise<boolean | 'start-up' | undefined> {
    const e = await this.entryNow(url, name, leftMs);
    return e ? (this.startUpEntry(e) ? 'start-up' : true) : e === null ? false : undefined;
  }

  /**
   * After an unload call that failed: whether the replica still lists `name` (its `/v1/models`,
   * read afresh). An unload the replica did, whose answer was lost (a connection dropped, the
   * answer past the call's bound), leaves it unlisted. Undefined when it cannot say (no list, no
   * answer in time).
   */
  async listed(url: string, name: string, leftMs = Infinity): Promise<boolean | undefined> {
    const e = await this.entryNow(url, name, leftMs);
    return e === undefined ? undefined : e !== null;
  }

  /**
   * The replica's word before a load into a slot the store believes free: the adapters other
   * than `name` that hold a slot there, by its own registry read afresh (undefined when it cannot
   * list them or did not answer: the store's count alone decides, as before). `storeKnows` names
   * what the store already records there (its own classification stands for those).
   */
  async occupied(
    url: string,
    name: string,
    storeKnows: ReadonlySet<string>,
    isStatic: (name: string) => boolean,
    /** What the access phase has left (ms): the read gets no longer. */
    leftMs = Infinity,
  ): Promise<string[] | undefined> {
    if (!this.api.residency) return undefined;
    let entries: { name: string; path: string }[] | undefined;
    try {
      if (leftMs <= 0) return undefined;
      entries = await this.api.residency(url, Math.min(this.timeoutMs(), leftMs));
    } catch {
      // Not answering /v1/models: the load call itself will tell; today's rules stand.
      return undefined;
    }
    if (entries === undefined) return undefined;
    const out: string[] = [];
    let unknown = false;
    for (const e of entries) {
      if (e.name === name || isStatic(e.name) || storeKnows.has(e.name)) continue;
      if (this.startUpEntry(e)) continue;
      out.push(e.name);
      unknown = true;
    }
    if (unknown) this.onUnknownResidents?.(url);
    return out;
  }

  /**
   * Right after this router's load of `name` landed on `url`, before any request is sent to it:
   * 'undo' if the replica's own list now holds more than `max` runtime-loaded adapters and it
   * does not report `name` running or waiting; 'keep' if over but it reports `name` busy or could
   * not say; 'within' otherwise (also when it cannot list its adapters: the store's count and the
   * trim after a poll decide, as before).
   */
  async afterLoad(
    url: string,
    name: string,
    max: number,
    isStatic: (name: string) => boolean,
    /** What the access phase has left (ms): the check (its asks again included) takes no longer. */
    leftMs = Infinity,
  ): Promise<'within' | 'undo' | 'keep'> {
    if (!this.api.residency || leftMs <= 0) return 'within';
    // The replica just answered a load: a slow answer now is a busy machine, not a dead replica.
    const timeout = Math.min(Math.max(this.timeoutMs(), AFTER_LOAD_READ_MS), leftMs / (FRESH_WORD_ASKS + 1));
    // What runs is asked together with the list, not once it answers: the excess lasts from the
    // load landing to the undo's unload, and a second round trip there broke invariant (ii) under
    // load (the fault run: 322 ms at load average ~12, grace 250). Asked after the load answered,
    // it covers a node that adopted the adapter by a poll since it landed; its age is counted
    // from asking, the wait for the list included, so a word the list made stale is asked again
    // (idleNow). Only judged when the list says over: within, the answer is dropped unread.
    const askedAt = monotonic(this.clock);
    const answer = this.api.activity ? this.ask(url, name, timeout) : undefined;
    let listed: { name: string; path: string }[] | undefined;
    try {
      listed = await this.api.residency(url, timeout);
    } catch {
      return 'within';
    }
    const holding = (listed ?? []).filter(
      (e) => !isStatic(e.name) && (this.isManaged?.(e.name, e.path) ?? true),
    );
    if (holding.length <= max || !holding.some((e) => e.name === name)) return 'within';
    // A slow answer is asked again for as long as this check may take: a node deciding alone
    // trims nothing, so an excess kept here stays until its shared state is back (fault run seed
    // 5 at load average ~13: two answers of 615 ms kept 3 adapters on a replica limited to 2 for
    // 4.9 s). Each unload still goes out on a fresh word. Stale until then keeps it: the trim
    // after a poll decides.
    const reason = await this.idleNow(
      url,
      name,
      new Set(),
      timeout,
      undefined,
      answer && { answer, askedAt },
      askedAt + timeout,
    );
    return reason ? 'keep' : 'undo';
  }

  private withheld(w: Withheld, why: string): void {
    for (const fn of this.listeners) fn(w);
    const key = pairKey(w.url, w.adapter);
    const now = this.clock.now();
    if (now - (this.logged.get(key) ?? -Infinity) < LOG_EVERY_MS) return;
    this.logged.set(key, now);
    this.log.warn(`unload of adapter '${w.adapter}' on ${w.url} withheld: ${why}`);
  }
}
