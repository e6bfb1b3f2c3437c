import { BackendError } from '../../src/backends/errors';
import type { LoadOutcome, ReplicaApi, Scrape, UnloadOutcome } from '../../src/backends/replica-api';
import type { ReplicaSpec } from '../../src/fleet/types';

/**
 * Idle replicas as the poller reads them, each scrape logged with its time (`now`: the test's
 * clock): the replicas' own request log, counted by the suites of replicas that leave the fleet.
 * A replica `answers` rejects is a pod gone (the connection refused).
 */
export class IdleReplicaApi implements ReplicaApi {
  /** Every scrape: the replica and when. */
  readonly calls: { url: string; at: number }[] = [];
  constructor(
    private readonly now: () => number,
    private readonly answers: (url: string) => boolean = () => true,
  ) {}
  async scrape(r: ReplicaSpec): Promise<Scrape> {
    this.calls.push({ url: r.url, at: this.now() });
    if (!this.answers(r.url)) throw new BackendError('connect', 'ECONNREFUSED');
    return {
      load: { waiting: 0, running: 0, kvUsage: 0.1, activeAdapters: [], malformedLines: 0 },
      registry: [],
      maxModelLen: 4096,
    };
  }
  async loadAdapter(): Promise<LoadOutcome> {
    return 'loaded';
  }
  async unloadAdapter(): Promise<UnloadOutcome> {
    return 'unloaded';
  }
  /** The replicas scraped in (from, to]. */
  polledIn(from: number, to = Infinity): Set<string> {
    return new Set(this.calls.filter((c) => c.at > from && c.at <= to).map((c) => c.url));
  }
}
