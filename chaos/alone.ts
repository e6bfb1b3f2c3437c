/**
 * When a node decided alone (Redis unreachable to it), read from its own log: the router says
 * "shared fleet state unavailable" when it starts deciding alone (and again while it stays so) and
 * "shared fleet state is back" when it shares decisions again. The limit check (ii) excuses an
 * excess then, as docs/reliability.md does ("Adapter slots": a node deciding alone trims nothing).
 */
export interface Span {
  from: number;
  to: number;
}

/** Bounded: a run longer than this many outages keeps the first ones (the check then says less, not more). */
const MAX_SPANS = 10_000;

export class AloneSpans {
  private readonly done: Span[] = [];
  private since: number | null = null;

  push(at: number, line: string): void {
    if (line.includes('shared fleet state unavailable')) this.since ??= at;
    else if (line.includes('shared fleet state is back') && this.since !== null) {
      if (this.done.length < MAX_SPANS) this.done.push({ from: this.since, to: at });
      this.since = null;
    }
  }

  /** Whether it decides alone now (a span is open). */
  get now(): boolean {
    return this.since !== null;
  }

  /** The spans so far, one still open ending at `endMs`. */
  until(endMs: number): Span[] {
    return this.since === null ? [...this.done] : [...this.done, { from: this.since, to: endMs }];
  }
}
