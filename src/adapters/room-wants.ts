/** One request waiting for room for its adapter, on any of `urls`. */
interface RoomWant {
  adapter: string;
  urls: readonly string[];
}

/**
 * Requests of this process waiting for room for their adapter: held in the gateway (the TTFT
 * hold), waiting for room anywhere, or waiting on one replica for an adapter to go idle. Each may
 * load on a replica as soon as that replica can take it, so prefetching leaves such a replica alone
 * (src/prefetch/planner.ts `roomWaitedFor`): its free slot or idle adapter is theirs.
 */
export class RoomWants {
  private readonly wants = new Set<RoomWant>();

  /** Registers a wait; the function returned ends it (once or more: the same). */
  add(adapter: string, urls: readonly string[]): () => void {
    const want: RoomWant = { adapter, urls };
    this.wants.add(want);
    return () => this.wants.delete(want);
  }

  /** Adapters a waiting request wants room for on `url`, each once. */
  on(url: string): string[] {
    const out = new Set<string>();
    for (const w of this.wants) if (w.urls.includes(url)) out.add(w.adapter);
    return [...out];
  }

  get size(): number {
    return this.wants.size;
  }
}

/**
 * One request's want of room, on while it waits and off while it does not: a request may be held,
 * then wait for room anywhere, then go. Either call may repeat. No adapter (the base model, a
 * static adapter): it never wants a slot.
 */
export class Wanting {
  private end: (() => void) | undefined;
  private wanted: readonly string[] = [];

  constructor(
    private readonly wants: RoomWants,
    private readonly adapter: string | undefined,
    private readonly urls: readonly string[],
  ) {}

  /** Wants room on `urls` (default: every replica of the configuration), and nowhere else. */
  on(urls: readonly string[] = this.urls): void {
    if (this.adapter === undefined) return;
    if (this.end && sameUrls(this.wanted, urls)) return;
    this.off();
    this.wanted = urls;
    this.end = this.wants.add(this.adapter, urls);
  }

  off(): void {
    this.end?.();
    this.end = undefined;
  }
}

function sameUrls(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((u, i) => u === b[i]);
}
