/**
 * The cold-load budget while the shared store does not answer: this node grants only its share
 * (the budget over the nodes last seen sharing it) less what it spent in the window, and what it
 * grants alone is merged into the shared window on recovery. Its spends of the last window are
 * remembered too, re-published when the shared state is found emptied or changed, so neither an
 * outage, a restart without persistence nor a `redis` record change hands out a fresh budget.
 */
import type { Clock } from '../../clock';
import type { SharedStore } from './shared-store';

/** Budget keys whose recent spends this node remembers (one per router configuration in practice). */
const RECENT_SPEND_KEYS = 1024;

/** A cold load this node was granted, and the shared epoch it is counted under (null: none yet). */
interface Spend {
  t: number;
  epoch: string | null;
  /** Granted alone and not merged yet: `merge` adds it (from `localSpends`), `republish` must not too. */
  alone?: true;
}

export class OutageBudget {
  /** Cold loads granted from this node's share while degraded, merged into the shared budget on recovery. */
  private readonly localSpends = new Map<string, { count: number; windowMs: number }>();
  /**
   * When this node's cold loads were granted, per budget key, for the last window: re-published
   * when the shared state is found emptied, so FLUSHALL or a restart without persistence does
   * not hand out a fresh budget within the same window.
   */
  private readonly recentSpends = new Map<string, { at: Spend[]; windowMs: number }>();
  /** The fleet's size as the store this one adopted last saw it, until this one's link answers. */
  private inheritedNodes: number | null = null;
  /**
   * The fleet's size as the store this one carried from (other state) saw it: a floor for this
   * store's life. The new state counts only the nodes the record change reached so far, while the
   * others still grant from the old state's window: the first node there, cut off, would read
   * one node and grant the whole budget alone.
   */
  private carriedNodes = 0;
  /**
   * The budget of the store that replaced this one (a `redis` record change, same or other
   * state): the node's spends move there (`carry`, `adopt`) or are made there, while decisions
   * under way here may still spend alone.
   */
  private successor: OutageBudget | null = null;

  /**
   * `predecessor`: the budget of the store this one replaces on the same shared state, until
   * it is adopted (the same node: its spends count as this one's).
   */
  constructor(
    private readonly shared: SharedStore,
    private readonly clock: Clock,
    private readonly predecessor: () => OutageBudget | null,
  ) {}

  /** Whether cold loads granted alone still wait to be merged into the shared budget. */
  get unmerged(): boolean {
    return this.localSpends.size > 0;
  }

  /** The shared store granted a cold load from `key`: remembered for the rest of its window. */
  spentShared(key: string, windowMs: number): void {
    this.rememberSpend(key, windowMs, this.clock.now());
  }

  /**
   * `count` of its shared grants under `epoch` were refunded there: no longer remembered, so a
   * share decided alone or a re-publish after an emptied state does not count them. The oldest
   * go: those left are no older than the grants still used, so none leaves the window early.
   */
  refundedShared(key: string, epoch: string | null, count: number): void {
    const r = this.recentSpends.get(key);
    if (!r || count <= 0) return;
    let left = count;
    r.at = r.at.filter((s) => s.alone || s.epoch !== epoch || left-- <= 0);
  }

  /**
   * Degraded, a node spends only its share of the budget (the budget over the nodes last seen
   * sharing it, rounded down) less what it was granted in the last window, shared or alone, and
   * counts what it grants, merged into the shared window on recovery: N nodes cut off together
   * get at most one more budget between them, not N, and a node that spent its share before the
   * outage gets nothing more. A process that never heard from the shared state (started during
   * the outage) knows neither the fleet's size nor what it spent before a restart: it grants
   * nothing until the state answers. Returns the wait before a retry, 0 if granted.
   */
  spendAlone(key: string, limit: number, windowMs: number, retryMs: number): number {
    const now = this.clock.now();
    const nodes = this.fleetNodes();
    const share = nodes === null ? 0 : Math.floor(limit / Math.max(1, nodes));
    const spent = this.spentInWindow(key, windowMs, now);
    // Refused: retry once enough of its grants left the window, or (no share) once a probe
    // may have found the shared state again.
    if (spent.length >= share) return share > 0 ? spent[spent.length - share]! + windowMs - now : retryMs;
    this.addLocalSpends(key, 1, windowMs);
    this.rememberSpend(key, windowMs, now, true);
    return 0;
  }

  /**
   * Nodes sharing the state as last seen by this node: by its own link, else by the store it
   * replaces on the same state (same node, a changed `timeout` say), no fewer than the store it
   * carried from on other state saw; null if never seen here.
   */
  private fleetNodes(): number | null {
    const seen = this.shared.liveNodes ?? this.predecessor()?.fleetNodes() ?? this.inheritedNodes;
    return seen === null ? null : Math.max(seen, this.carriedNodes);
  }

  /**
   * When this node spent from `key` in the last window, oldest first: here and in every store of
   * the process this one replaced or was replaced by (predecessors not adopted yet, successors on
   * the same or other state). Each spend is kept by one of them (`carry` and `adopt` move it), so
   * each counts once; a decision under way on a replaced store sees what its successor spent
   * (seeds 1223, 102148, 102791: a retired store, its spends carried away, granted a fresh share).
   */
  private spentInWindow(key: string, windowMs: number, now: number): number[] {
    const family = new Set<OutageBudget>();
    const visit = (b: OutageBudget | null): void => {
      if (!b || family.has(b)) return;
      family.add(b);
      visit(b.predecessor());
      visit(b.successor);
    };
    visit(this);
    return [...family]
      .flatMap((b) => b.recentSpends.get(key)?.at ?? [])
      .map((s) => s.t)
      .filter((t) => now - t < windowMs)
      .sort((a, b) => a - b);
  }

  /** `next`'s store replaced this one's on the same state: its spends count here too. */
  succeededBy(next: OutageBudget): void {
    this.successor = next;
  }

  /** Cold loads granted here while deciding alone, to merge into the shared budget. */
  private addLocalSpends(key: string, count: number, windowMs: number): void {
    const had = this.localSpends.get(key);
    this.localSpends.set(key, { count: count + (had?.count ?? 0), windowMs });
  }

  /** Spends of this window, kept to re-publish should the state be found emptied. */
  private addRecentSpends(key: string, at: Spend[], windowMs: number): void {
    const had = this.recentSpends.get(key);
    this.recentSpends.set(key, { at: [...(had?.at ?? []), ...at], windowMs });
  }

  /** Remembers a cold load granted to this node (shared or local) for the rest of its window. */
  private rememberSpend(key: string, windowMs: number, at: number, alone = false): void {
    const r = this.recentSpends.get(key) ?? { at: [], windowMs };
    r.windowMs = windowMs;
    r.at = r.at.filter((s) => at - s.t < windowMs);
    // Counted in the state as last seen (a local one: merged there on recovery).
    r.at.push({ t: at, epoch: this.shared.currentEpoch ?? null, ...(alone ? { alone: true as const } : {}) });
    // Re-inserted: the least recently spent keys go first past the bound.
    this.recentSpends.delete(key);
    this.recentSpends.set(key, r);
    if (this.recentSpends.size > RECENT_SPEND_KEYS)
      this.recentSpends.delete(this.recentSpends.keys().next().value!);
  }

  /** Adds the cold loads granted locally during the outage to the shared budgets' windows. */
  async merge(): Promise<void> {
    for (const [key, spent] of [...this.localSpends]) {
      this.localSpends.delete(key);
      try {
        await this.shared.addToBudget?.(key, spent.count, spent.windowMs);
      } catch (err) {
        this.addLocalSpends(key, spent.count, spent.windowMs);
        throw err;
      }
      // Counted now in the state that answered: a later emptying re-publishes them from here.
      const epoch = this.shared.currentEpoch ?? null;
      for (const s of this.recentSpends.get(key)?.at ?? [])
        if (s.alone) {
          delete s.alone;
          s.epoch = epoch;
        }
    }
  }

  /**
   * Adds this node's cold loads of the last window that the shared state does not count (made
   * under another epoch: before it was emptied, or on other state) to its budgets. Each node
   * adds only its own, so the fleet's sum is what the lost window held; a window this opens
   * starts now and may count them a little longer than the lost one would have (stricter).
   */
  async republish(): Promise<void> {
    const now = this.clock.now();
    const epoch = this.shared.currentEpoch ?? null;
    for (const [key, r] of [...this.recentSpends]) {
      r.at = r.at.filter((s) => now - s.t < r.windowMs);
      if (r.at.length === 0) {
        this.recentSpends.delete(key);
        continue;
      }
      // A spend granted alone and not merged yet is `merge`'s to add (counted twice before: a
      // runtime replaced during an outage dated its grants with no epoch, and recovery added them
      // here and in `merge`).
      const missing = r.at.filter((s) => !s.alone && (s.epoch === null || s.epoch !== epoch));
      if (missing.length === 0) continue;
      // Marked before the add: a republish run meanwhile (a record change carrying spends while a
      // grant pushes them on) must not add them too. A failed add leaves them to the next one.
      const was = missing.map((s) => s.epoch);
      for (const s of missing) s.epoch = epoch;
      try {
        await this.shared.addToBudget?.(key, missing.length, r.windowMs);
      } catch (err) {
        missing.forEach((s, i) => (s.epoch = was[i] ?? null));
        throw err;
      }
    }
  }

  /**
   * Takes over what `pred` (on other shared state) and its predecessors not adopted yet spent
   * this window, as not counted here yet: `republish` adds it to this state's budgets. `pred`
   * counts it here from then on (`spentInWindow`).
   */
  carry(pred: OutageBudget): void {
    pred.successor = this;
    this.carriedNodes = Math.max(this.carriedNodes, pred.fleetNodes() ?? 0);
    const now = this.clock.now();
    // Its predecessors on its state not adopted yet too: every spend of the node is here from now on.
    for (let b: OutageBudget | null = pred; b; b = b.predecessor()) {
      for (const [key, r] of b.recentSpends) {
        const at = r.at.filter((s) => now - s.t < r.windowMs).map((s) => ({ t: s.t, epoch: null }));
        if (at.length === 0) continue;
        this.addRecentSpends(key, at, r.windowMs);
      }
      b.recentSpends.clear();
    }
  }

  /** Takes what `pred` (the same node on the same state) spent alone and this window. */
  adopt(pred: OutageBudget): void {
    for (const [key, spent] of pred.localSpends) this.addLocalSpends(key, spent.count, spent.windowMs);
    // What it spent this window, to re-publish should the state be found emptied later.
    for (const [key, r] of pred.recentSpends) this.addRecentSpends(key, r.at, r.windowMs);
    // The same node on the same state: the fleet it saw is this one's until this link answers.
    this.inheritedNodes ??= pred.fleetNodes();
    pred.localSpends.clear();
    pred.recentSpends.clear();
  }
}
