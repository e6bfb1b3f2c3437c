import type { AdapterRef } from '../fleet/types';

/** One adapter's decayed demand, and where the configuration that saw it routes. */
export interface AdapterDemand {
  adapter: AdapterRef;
  /** The replicas of the router configuration that saw the requests: a copy goes only there. */
  urls: readonly string[];
  /** Requests, decayed by half per half-life, as of `at`. */
  count: number;
  at: number;
}

/**
 * Decayed request counts per on-demand adapter (half-life `halfLifeMs`), over a fixed number of
 * adapters: when full, a new name replaces the one with the least demand now, so a stream of
 * names asked once (a scan, a client's typos) cannot push the hot adapters out.
 */
export class DemandTracker {
  private readonly entries = new Map<string, AdapterDemand>();

  constructor(
    public halfLifeMs: number,
    readonly capacity = 256,
  ) {
    if (!(halfLifeMs > 0)) throw new RangeError(`halfLifeMs must be > 0, got ${halfLifeMs}`);
    if (!(capacity >= 1)) throw new RangeError(`capacity must be >= 1, got ${capacity}`);
  }

  get size(): number {
    return this.entries.size;
  }

  observe(adapter: AdapterRef, urls: readonly string[], now: number): void {
    const e = this.entries.get(adapter.name);
    if (e) {
      e.count = e.count * this.decay(now - e.at) + 1;
      e.at = now;
      e.adapter = adapter;
      e.urls = urls;
      return;
    }
    if (this.entries.size >= this.capacity) this.forgetColdest(now);
    this.entries.set(adapter.name, { adapter, urls, count: 1, at: now });
  }

  /**
   * `url` left the fleet: no demand names it any more. An adapter's demand decays over many
   * half-lives (a busy one, minutes), its replicas the configuration's when last asked for
   * (dst/process-audit.ts, seed 3123801).
   */
  forget(url: string): void {
    for (const e of this.entries.values()) if (e.urls.includes(url)) e.urls = e.urls.filter((u) => u !== url);
  }

  /** Decayed requests of `name` now (0 if not tracked). */
  count(name: string, now: number): number {
    const e = this.entries.get(name);
    return e ? e.count * this.decay(now - e.at) : 0;
  }

  /**
   * Requests per second now, as a steady rate r would have left the decayed count at
   * r × half-life / ln 2.
   */
  rate(name: string, now: number): number {
    return (this.count(name, now) * Math.LN2) / (this.halfLifeMs / 1000);
  }

  /** Every tracked adapter with its demand now, most demanded first; those decayed below `floor` are dropped. */
  snapshot(now: number, floor = 0.05): { demand: AdapterDemand; count: number }[] {
    const out: { demand: AdapterDemand; count: number }[] = [];
    for (const [name, e] of this.entries) {
      const count = e.count * this.decay(now - e.at);
      if (count < floor) this.entries.delete(name);
      else out.push({ demand: e, count });
    }
    return out.sort((a, b) => b.count - a.count);
  }

  private forgetColdest(now: number): void {
    let coldest: string | undefined;
    let least = Infinity;
    for (const [name, e] of this.entries) {
      const c = e.count * this.decay(now - e.at);
      if (c < least) [least, coldest] = [c, name];
    }
    if (coldest !== undefined) this.entries.delete(coldest);
  }

  private decay(ms: number): number {
    return Math.pow(2, -Math.max(0, ms) / this.halfLifeMs);
  }
}
