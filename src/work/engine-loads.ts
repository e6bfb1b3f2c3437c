/**
 * The adapter loads this router has under way on each replica, and how long they stop its
 * engine. vLLM runs a load between engine steps, one at a time, and no step while it runs
 * (EngineCore.run_busy_loop, vllm/v1/engine/core.py at vLLM v0.11.0: sim/engine/engine.ts `loadWeights`
 * models it): a request sent to a replica where loads are under way waits for them, and a load it
 * needs there starts after them. Without this a replica in the middle of a load looked as free as
 * an idle one, and cold requests were placed behind each other's loads (issue 34, two classes).
 */
export class EngineLoads {
  /** Per replica: the learned time of each load under way, in the order they began, and when the last is expected to end. */
  private readonly byUrl = new Map<string, { pending: number[]; until: number }>();

  /** A load of about `ms` began on `url` at `now`; call the function returned when it ends. */
  begun(url: string, now: number, ms: number): (at: number) => void {
    let r = this.byUrl.get(url);
    if (!r) this.byUrl.set(url, (r = { pending: [], until: now }));
    r.pending.push(ms);
    r.until = Math.max(now, r.until) + ms;
    let ended = false;
    return (at) => {
      if (ended) return;
      ended = true;
      // Loads end in the order they ran: the first expected is the one done; the rest follow from now.
      r.pending.shift();
      if (r.pending.length === 0) return void this.byUrl.delete(url);
      r.until = at + r.pending.reduce((n, x) => n + x, 0);
    };
  }

  /** Whether a load is under way on `url`. */
  busy(url: string): boolean {
    return this.byUrl.has(url);
  }

  /** How many of those loads are under way on `url`. */
  count(url: string): number {
    return this.byUrl.get(url)?.pending.length ?? 0;
  }

  /** How long the engine of `url` is expected to stay stopped by those loads, from `now`. */
  stallMs(url: string, now: number): number {
    const r = this.byUrl.get(url);
    return r ? Math.max(0, r.until - now) : 0;
  }
}
