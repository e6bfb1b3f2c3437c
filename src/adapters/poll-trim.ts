import type { FleetStore } from '../fleet/store';
import type { Logger } from '../log';
import type { AdapterManager, AdapterPolicy } from './manager';

/**
 * The trim after a poll: a poll may have adopted a load that landed after its timeout (or a peer's
 * made while cut off from the shared state), and the excess over `max_loaded_adapters` is unloaded
 * once idle (Room.trim). One trim a replica at a time.
 */
export class PollTrim {
  /** The trim under way, per replica. */
  private readonly underWay = new Map<string, Promise<void>>();
  /** Its runtime was replaced (`stop`): no trim, no unload from here on. */
  private stopped = false;

  constructor(
    private readonly store: FleetStore,
    private readonly manager: AdapterManager,
    private readonly log: Logger,
    /** The adapter policy of the configuration routing to a replica, if one does. */
    private readonly policyOf: (url: string) => AdapterPolicy | undefined,
  ) {}

  /** Whether a trim of `url` is under way. */
  busy(url: string): boolean {
    return this.underWay.has(url);
  }

  /** A poll of `url` answered: unload the excess over the limit once idle. */
  after(url: string): void {
    const policy = this.policyOf(url);
    if (this.stopped || !policy || policy.maxLoadedAdapters === 0 || this.underWay.has(url)) return;
    const halted = () => this.stopped;
    const trim = this.store
      .views([url])
      .then(([v]) =>
        v && v.residentCount > policy.maxLoadedAdapters && !halted()
          ? this.manager.trim(url, { ...policy, halted })
          : undefined,
      )
      .catch((err: Error) => this.log.warn(`could not trim adapters on ${url}: ${err.message}`))
      .finally(() => this.underWay.delete(url));
    this.underWay.set(url, trim);
  }

  /**
   * Its runtime was replaced (a `redis` record change): trimming is the successor's, which polls
   * now. A poll round under way at the change ends after it and starts no trim, and a trim under
   * way starts no unload (checked right before its lock and its replica call:
   * `AdapterPolicy.halted`). Resolves once the trims under way have ended, so the store stays
   * open until the ends of their unloads are sent there.
   */
  stop(): Promise<void> {
    this.stopped = true;
    return Promise.all(this.underWay.values()).then(() => undefined);
  }
}
