/**
 * How often each adapter is asked for, decayed exponentially (half-life `halfLifeMs`): the
 * frequency half of frequency + recency eviction. Process-wide, bounded to `capacity`
 * adapters (the least recently seen are forgotten first).
 */
export class AdapterStats {
  private entries = new Map<string, { count: number; at: number }>();

  constructor(
    private readonly halfLifeMs = 120_000,
    private readonly capacity = 100_000,
  ) {}

  observe(name: string, now: number): void {
    const e = this.entries.get(name);
    const count = e ? e.count * this.decay(now - e.at) + 1 : 1;
    this.entries.delete(name);
    this.entries.set(name, { count, at: now });
    if (this.entries.size > this.capacity) this.entries.delete(this.entries.keys().next().value!);
  }

  /** Requests per half-life, roughly: 0 for an adapter never seen. */
  frequency(name: string, now: number): number {
    const e = this.entries.get(name);
    return e ? e.count * this.decay(now - e.at) : 0;
  }

  private decay(ms: number): number {
    return Math.pow(2, -Math.max(0, ms) / this.halfLifeMs);
  }
}
