/**
 * What this node did over the last minutes, in fixed time buckets, for the placement page's
 * small charts: requests routed, adapter loads and unloads, refusals, load time. Counted as it
 * happens (no timer); memory is bounded by the number of buckets.
 */
export interface HistoryBucket {
  /** Start of the bucket (ms, the runtime's clock). */
  at: number;
  requests: number;
  loads: number;
  unloads: number;
  /** Requests refused with Retry-After (no slot, back-off, no replica, budgets). */
  refusals: number;
  /** Sum of successful load durations, ms (mean = loadMs / loads). */
  loadMs: number;
}

export type HistoryKind = 'requests' | 'loads' | 'unloads' | 'refusals';

export class RecentHistory {
  private readonly buckets: HistoryBucket[] = [];

  constructor(
    readonly bucketMs = 10_000,
    readonly keep = 60,
  ) {}

  record(kind: HistoryKind, now: number, loadMs?: number): void {
    const b = this.bucket(now);
    b[kind]++;
    if (loadMs !== undefined) b.loadMs += loadMs;
  }

  /** The last `keep` buckets up to `now`, oldest first, empty ones included (a chart's x axis). */
  series(now: number): HistoryBucket[] {
    const last = Math.floor(now / this.bucketMs) * this.bucketMs;
    const byAt = new Map(this.buckets.map((b) => [b.at, b]));
    return Array.from({ length: this.keep }, (_, i) => {
      const at = last - (this.keep - 1 - i) * this.bucketMs;
      return { ...(byAt.get(at) ?? { at, requests: 0, loads: 0, unloads: 0, refusals: 0, loadMs: 0 }) };
    });
  }

  private bucket(now: number): HistoryBucket {
    const at = Math.floor(now / this.bucketMs) * this.bucketMs;
    let b = this.buckets.at(-1);
    if (b?.at === at) return b;
    // A clock that stepped back lands in the bucket it names, if still kept.
    b = this.buckets.find((x) => x.at === at);
    if (b) return b;
    b = { at, requests: 0, loads: 0, unloads: 0, refusals: 0, loadMs: 0 };
    this.buckets.push(b);
    this.buckets.sort((x, y) => x.at - y.at);
    while (this.buckets.length > this.keep) this.buckets.shift();
    return b;
  }
}
