/** Exponentially weighted moving average, starting at a prior. */
export class Ewma {
  private v: number;
  private n = 0;
  constructor(
    prior: number,
    private readonly alpha = 0.2,
  ) {
    this.v = prior;
  }

  get value(): number {
    return this.v;
  }

  /** Samples seen so far. */
  get count(): number {
    return this.n;
  }

  observe(x: number): void {
    if (!Number.isFinite(x)) return;
    // The first sample replaces the prior outright: a measured figure beats a guessed one.
    this.v = this.n === 0 ? x : this.v + this.alpha * (x - this.v);
    this.n++;
  }
}
