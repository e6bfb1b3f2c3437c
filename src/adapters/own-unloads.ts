import type { ReplicaView, ResidencyState } from '../fleet/types';

/**
 * This node's own unload calls under way, by replica and adapter: its decisions treat such an
 * adapter as `unloading` there whatever the store says. The store's `unloading` entry can be lost
 * while the call runs (FLUSHALL, a restart empty or from an older copy, a Sentinel switch that lost
 * writes), and the next poll writes back what the replica still lists: `loaded` (dst seed 741908).
 * The node needs no store to know its own calls.
 *
 * An unload that ends done after the store lost its lock (its end refused: `finish` answered not
 * current) may leave that stale `loaded` behind until a poll reads the replica again: such an
 * adapter stays `unloading` here until a poll of this node begun after the end.
 *
 * An unload whose end the store recorded can be lost later: Redis back from an older snapshot, or
 * a Sentinel switch that lost writes, brings the adapter back `loaded` (dst seed 1038807). The node
 * keeps its done unloads (one entry per replica and adapter) and, each time the shared state is
 * back after an outage (`sharedAgain`), reads them `unloading` until a poll begun after that.
 *
 * Read `unloading` for such an end alone (no call under way), an adapter asks for a poll of its
 * replica begun from then (`onUnpolled`), once per replica and time: without it, a request held
 * on it waited for the next poll round, and with `poll_interval_ms` past the queue and load
 * timeouts got a 503 (review 62). The poll itself still decides: nothing reads `loaded` before it.
 *
 * A runtime that replaced another of this process (a `redis` record change) reads the older one's
 * too: the replicas are the same (`inherit`). A poll tells only the runtimes on its own shared
 * state: one on other state writes nothing to the older one's store, which may still read the
 * adapter `loaded` for a decision left there (dst seed 741908 under another timer order: node 1's
 * poll on the new state, then a request still deciding on the old one proxied onto its own unload).
 */
export class OwnUnloads {
  /** Unload calls under way, per replica and adapter. */
  private readonly under = new Map<string, Map<string, number>>();
  /** Per replica and adapter: when an unload ended done whose lock the store had lost. */
  private readonly lost = new Map<string, Map<string, number>>();
  /** Per replica and adapter: when an unload of this node last ended done (recorded or not). */
  private readonly done = new Map<string, Map<string, number>>();
  /**
   * The runtimes that replaced this one: an unload of this one ending after the change (a decision
   * or a trim still under way here) is theirs to hold after a later outage too (`done`).
   */
  private readonly heirs: OwnUnloads[] = [];
  /** Those of the runtimes this one replaced, while they may still read `unloading` somewhere. */
  private older: { unloads: OwnUnloads; sameState: boolean }[] = [];
  /** Per replica: when the latest poll written to this runtime's store began. */
  private readonly polledFrom = new Map<string, number>();
  /** Its runtime stepped down and its decisions ended: it begins no more unloads. */
  private retired = false;
  /**
   * Asks for a poll of `url` begun from now (runtime-wiring.ts: the poller's `refreshUrl`), for an
   * adapter there read `unloading` only for an unpolled end: nothing else asks for one before the
   * next round.
   */
  onUnpolled: ((url: string) => void) | null = null;
  /** Per replica: the latest unpolled end a poll was asked for (`ask`): one ask per time, however many wait. */
  private readonly asked = new Map<string, number>();

  /**
   * Drops what is kept of `url` (a replica that left): its unload ends and polls. False, and
   * nothing dropped, while an unload of this node is under way there.
   */
  forget(url: string): boolean {
    if (this.under.has(url)) return false;
    this.lost.delete(url);
    this.done.delete(url);
    this.polledFrom.delete(url);
    this.asked.delete(url);
    return true;
  }

  /** An unload of `name` on `url` is under way (from its grant); undo with `end`. */
  begin(url: string, name: string): void {
    let m = this.under.get(url);
    if (!m) this.under.set(url, (m = new Map()));
    m.set(name, (m.get(name) ?? 0) + 1);
  }

  end(url: string, name: string): void {
    const m = this.under.get(url);
    if (!m) return;
    const n = (m.get(name) ?? 1) - 1;
    if (n > 0) m.set(name, n);
    else m.delete(name);
    if (m.size === 0) this.under.delete(url);
  }

  /**
   * An unload of `name` on `url` ended done at `at`. `recorded`: the store took its end; not, it
   * had lost the lock (a reset after the grant) and may still read `loaded`.
   */
  ended(url: string, name: string, at: number, recorded: boolean): void {
    this.doneAt(url, name, at);
    if (!recorded) latest(this.lost, url, name, at);
  }

  /** Keeps a done unload here and in the runtimes that replaced this one. */
  private doneAt(url: string, name: string, at: number): void {
    latest(this.done, url, name, at);
    for (const h of this.heirs) h.doneAt(url, name, at);
  }

  /**
   * The shared state is back at `at` after an outage, maybe from an older copy that lacks the
   * ends of this node's done unloads: each reads `unloading` until a poll begun after `at`.
   */
  sharedAgain(at: number): void {
    for (const [url, m] of this.done) for (const name of m.keys()) latest(this.lost, url, name, at);
  }

  /**
   * This runtime replaced `pred`'s (a `redis` record change): `pred`'s unloads are this node's too.
   * `sameState`: both on one shared state, so this one's polls are `pred`'s too.
   */
  inherit(pred: OwnUnloads, sameState = true): void {
    this.older.push({ unloads: pred, sameState });
    // Kept here: the older runtime is dropped once idle, and a later outage may still lose these,
    // and those it ends from now on (review 62: before, one ended after the change was held by
    // no runtime after the next outage, and read `loaded` from a restored copy).
    for (const [url, m] of pred.done) for (const [name, at] of m) latest(this.done, url, name, at);
    pred.heirs.push(this);
  }

  /** `pred`'s runtime begins no more unloads: dropped here once it reads nothing (`polled`). */
  retire(): void {
    this.retired = true;
  }

  /**
   * A poll of `url` begun at `startedAt` was applied: unloads that ended before it are read there
   * now. Polling moves to the newest runtime, so it tells the older ones on its shared state.
   */
  polled(url: string, startedAt: number): void {
    this.polledFrom.set(url, Math.max(startedAt, this.polledFrom.get(url) ?? -Infinity));
    const m = this.lost.get(url);
    if (m) {
      for (const [name, at] of m) if (at <= startedAt) m.delete(name);
      if (m.size === 0) this.lost.delete(url);
    }
    if (this.older.length === 0) return;
    // On other state the older store got nothing from this poll: its entries stay for its decisions.
    for (const o of this.older) if (o.sameState) o.unloads.polled(url, startedAt);
    const since = (u: string) => this.polledFrom.get(u) ?? -Infinity;
    this.older = this.older.filter(
      (o) => !o.unloads.retired || (o.sameState ? !o.unloads.idle() : o.unloads.pending(since)),
    );
  }

  /** Whether an unload here or in a runtime replaced is under way, or ended after `since` of its replica. */
  private pending(since: (url: string) => number): boolean {
    if (this.under.size > 0) return true;
    for (const [url, m] of this.lost) for (const at of m.values()) if (at > since(url)) return true;
    return this.older.some((o) => o.unloads.pending(since));
  }

  /** Nothing unloading here nor in the runtimes replaced (the request path's usual case: nothing allocated). */
  private idle(): boolean {
    if (this.under.size > 0 || this.lost.size > 0) return false;
    for (let i = 0; i < this.older.length; i++) if (!this.older[i]!.unloads.idle()) return false;
    return true;
  }

  /** An unload of `name` on `url` under way here or in a runtime replaced. */
  private underWay(url: string, name: string): boolean {
    if (this.under.get(url)?.has(name) === true) return true;
    for (let i = 0; i < this.older.length; i++) if (this.older[i]!.unloads.underWay(url, name)) return true;
    return false;
  }

  /**
   * An unload of `name` on `url` ended done, its end unrecorded and no poll begun since. `since`:
   * past a runtime on other state, when the reader's own store was last polled (undefined before):
   * the older runtime's entries stay until its own store is polled, not the reader's.
   */
  private unpolled(url: string, name: string, since?: number): boolean {
    const at = this.lost.get(url)?.get(name);
    if (at !== undefined && (since === undefined || at > since)) return true;
    for (let i = 0; i < this.older.length; i++) {
      const o = this.older[i]!;
      const from = o.sameState ? since : (since ?? this.polledFrom.get(url) ?? -Infinity);
      if (o.unloads.unpolled(url, name, from)) return true;
    }
    return false;
  }

  /** Whether this node is unloading `name` from `url` (or its store may still miss such an unload's end). */
  unloading(url: string, name: string | null): boolean {
    if (name === null || this.idle()) return false;
    if (this.underWay(url, name)) return true;
    if (!this.unpolled(url, name)) return false;
    this.ask(url);
    return true;
  }

  /**
   * `state` as this node knows it: `unloading` while its own unload of `name` on `url` is under
   * way, even where the store has no entry (emptied, not polled yet: a load then would race the
   * unload); after such an unload's unrecorded end, an entry the store still has.
   */
  stateOf(url: string, name: string | null, state: ResidencyState | undefined): ResidencyState | undefined {
    if (state === 'unloading' || name === null || this.idle()) return state;
    if (this.underWay(url, name)) return 'unloading';
    if (state === undefined || !this.unpolled(url, name)) return state;
    this.ask(url);
    return 'unloading';
  }

  /**
   * A poll of `url` asked for (`onUnpolled`) unless one was asked since its latest unpolled end:
   * the poll begins after the ask, so after every end kept then.
   */
  private ask(url: string): void {
    const at = this.latestUnpolled(url);
    if (at <= (this.asked.get(url) ?? -Infinity)) return;
    this.asked.set(url, at);
    this.onUnpolled?.(url);
  }

  /**
   * The poll asked for `url` read nothing (timed out, refused, no such replica): the next read of
   * an unpolled end there asks again (runtime-wiring.ts spaces the asks by the poll timeout).
   */
  askAgain(url: string): void {
    this.asked.delete(url);
  }

  /** Whether a poll of `url` begun at `at` or later was applied here. */
  polledSince(url: string, at: number): boolean {
    return (this.polledFrom.get(url) ?? -Infinity) >= at;
  }

  /** The latest end of `url` kept unpolled here or in a runtime replaced (-Infinity: none). */
  private latestUnpolled(url: string): number {
    let at = -Infinity;
    const m = this.lost.get(url);
    if (m) for (const t of m.values()) at = Math.max(at, t);
    for (let i = 0; i < this.older.length; i++) at = Math.max(at, this.older[i]!.unloads.latestUnpolled(url));
    return at;
  }

  /**
   * Shows this node's own unloads of `adapter` in `views` as the store's `unloading` entry would
   * read: not a holder there. A copy of the view's entry: the store's own is never changed.
   */
  overlay(views: ReplicaView[], adapter: string): void {
    if (this.idle()) return;
    for (const v of views) {
      const a = v.adapter;
      // A placement or claim is no residency: nobody is loading it there yet.
      if (a && a.state !== 'unloading' && !a.placed && !a.claimed && this.unloading(v.url, adapter))
        v.adapter = { ...a, state: 'unloading' };
    }
  }
}

/** Sets `m[url][name]` to `at` unless it holds a later time. */
function latest(m: Map<string, Map<string, number>>, url: string, name: string, at: number): void {
  let byName = m.get(url);
  if (!byName) m.set(url, (byName = new Map()));
  byName.set(name, Math.max(at, byName.get(name) ?? -Infinity));
}
