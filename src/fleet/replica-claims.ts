/**
 * Which nodes route to each replica (FleetStore.retainReplicas), as the in-process store keeps it:
 * the twin of the Redis scripts' `claims:<url>`, `claimed` and `nc:<node>` keys
 * (src/fleet/redis/scripts/forgetting.ts). A replica no live claim holds, last claimed `graceMs`
 * ago or more, is one the store may forget (if nothing runs on it: the store's check).
 */
export class ReplicaClaims {
  /** url -> node -> when that node last claimed it. */
  private readonly byUrl = new Map<string, Map<string, number>>();
  /** node -> the urls it claims (its claims dropped at once when it stops listing one). */
  private readonly byNode = new Map<string, Set<string>>();
  /**
   * url -> when some node last routed to it: a claim made or dropped, or a lapsed claim's node's
   * last sign of life. A url with none was never claimed (registered by an older version): kept.
   */
  private readonly lastClaimed = new Map<string, number>();

  /** `node` routes to `url` at `at` (a registration, or a retain listing it). */
  claim(url: string, node: string, at: number): void {
    let nodes = this.byUrl.get(url);
    if (!nodes) this.byUrl.set(url, (nodes = new Map()));
    nodes.set(node, at);
    let urls = this.byNode.get(node);
    if (!urls) this.byNode.set(node, (urls = new Set()));
    urls.add(url);
    this.stamp(url, at);
  }

  /** Whether `node` claims `url` now: registered or listed by its last retain, not dropped since. */
  claimedBy(url: string, node: string): boolean {
    return this.byNode.get(node)?.has(url) ?? false;
  }

  /** `node` no longer lists any url but `listed`: its other claims go at once (it routed there until `at`). */
  dropUnlisted(node: string, listed: ReadonlySet<string>, at: number, known: (url: string) => boolean): void {
    const urls = this.byNode.get(node);
    if (!urls) return;
    for (const url of [...urls]) {
      if (listed.has(url)) continue;
      this.unclaim(url, node);
      if (known(url)) this.stamp(url, at);
    }
  }

  /**
   * The registered urls no live claim holds, last claimed before `at - graceMs`, of the `limit`
   * oldest so. A claim is live while its node claimed or heartbeat (`beat`) within `nodeTtlMs`; a
   * lapsed one (a dead node) is dropped, its node's last sign of life counted as the last claim.
   */
  unclaimed(
    at: number,
    graceMs: number,
    nodeTtlMs: number,
    limit: number,
    known: (url: string) => boolean,
    beat?: (node: string) => number | undefined,
  ): string[] {
    const due = [...this.lastClaimed]
      .filter(([, t]) => t < at - graceMs)
      .sort(([u, x], [v, y]) => x - y || (u < v ? -1 : u > v ? 1 : 0))
      .slice(0, limit);
    const out: string[] = [];
    for (const [url] of due) {
      // Not registered (claims left from a state since emptied): only the claims go.
      if (!known(url)) {
        this.drop(url);
        continue;
      }
      let live = false;
      for (const [node, t] of [...(this.byUrl.get(url) ?? [])]) {
        const seen = Math.max(t, beat?.(node) ?? -Infinity);
        if (seen > at - nodeTtlMs) {
          // Restamped with its node's last sign of life: else, with a grace under the retain
          // interval, live urls stayed due, first in the batch, and a fleet of more than `limit`
          // replicas never reached the ones to forget (as the script).
          live = true;
          this.stamp(url, seen);
          continue;
        }
        this.unclaim(url, node);
        this.stamp(url, seen);
      }
      if (!live && this.lastClaimed.get(url)! < at - graceMs) out.push(url);
    }
    return out;
  }

  /**
   * Node `node` is gone: silent past the node ttl (its last heartbeat `beat`), or leaving the state
   * (no `beat`: it routed there until `at`). All its claims go, each stamped with its last sign of
   * life: one made after that heartbeat, left to `unclaimed`, stayed for good on a replica a live
   * node keeps claiming (never due there), as the script's `dropclaims`.
   */
  dropNode(node: string, at: number, known: (url: string) => boolean, beat?: number): void {
    for (const url of [...(this.byNode.get(node) ?? [])]) {
      const seen = beat === undefined ? at : Math.max(this.byUrl.get(url)?.get(node) ?? beat, beat);
      this.unclaim(url, node);
      if (known(url)) this.stamp(url, seen);
    }
  }

  /** When `node` last claimed `url`, if it claims it now (undefined: it does not). */
  claimedAt(url: string, node: string): number | undefined {
    return this.byUrl.get(url)?.get(node);
  }

  /** The url was forgotten: every claim record of it goes. */
  drop(url: string): void {
    for (const node of [...(this.byUrl.get(url)?.keys() ?? [])]) this.unclaim(url, node);
    this.lastClaimed.delete(url);
  }

  private unclaim(url: string, node: string): void {
    const nodes = this.byUrl.get(url);
    nodes?.delete(node);
    if (nodes?.size === 0) this.byUrl.delete(url);
    const urls = this.byNode.get(node);
    urls?.delete(url);
    if (urls?.size === 0) this.byNode.delete(node);
  }

  private stamp(url: string, at: number): void {
    this.lastClaimed.set(url, Math.max(at, this.lastClaimed.get(url) ?? -Infinity));
  }
}
