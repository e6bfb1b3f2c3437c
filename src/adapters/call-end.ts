import type { Clock } from '../clock';
import type { Signal } from '../signal';
import type { FleetStore, LoadEnd } from '../fleet/store';
import type { Fence } from '../fleet/types';
import type { Logger } from '../log';
import type { LoadRecord } from './policy';

/**
 * How a load or unload call ends, for the load call (load-call.ts) and the idle unload alike: its
 * lock in the store, then its record (the store's event, the log, the listeners, the room signal).
 */
export class CallEnds {
  /** Told after every load and unload call (metrics, status). */
  private readonly listeners: ((r: LoadRecord) => void)[] = [];

  constructor(
    private readonly store: FleetStore,
    private readonly clock: Clock,
    private readonly log: Logger,
    /** Notified whenever a slot may have freed up (AdapterManager.roomChanged). */
    private readonly roomChanged: Signal,
  ) {}

  /** Adds a listener told after every load and unload call; the others keep theirs. */
  addListener(fn: (r: LoadRecord) => void): void {
    this.listeners.push(fn);
  }

  /**
   * Ends a load or unload; a stale fence means another node took over, whose result stands (or the
   * store lost the lock: a reset). False then.
   */
  async finish(op: 'load', url: string, adapter: string, fence: Fence, ok: LoadEnd): Promise<boolean>;
  async finish(op: 'unload', url: string, adapter: string, fence: Fence, ok: boolean): Promise<boolean>;
  async finish(op: 'load' | 'unload', url: string, adapter: string, fence: Fence, ok: LoadEnd) {
    const at = this.clock.now();
    const current =
      op === 'load'
        ? await this.store.finishLoad(url, adapter, fence, ok, at)
        : await this.store.finishUnload(url, adapter, fence, ok as boolean, at);
    if (!current)
      this.log.warn(`${op} of adapter '${adapter}' on ${url} outlived its lock; the next poll reconciles it`);
    return current;
  }

  record(r: LoadRecord, why?: string): void {
    this.store
      .pushEvent({
        at: this.clock.now(),
        url: r.url,
        adapter: r.adapter,
        op: r.op,
        result: r.ok ? 'ok' : 'error',
        ms: r.ms,
        detail: why,
      })
      .catch((err: Error) => this.log.warn(`could not record ${r.op} event: ${err.message}`));
    if (r.ok) this.log.info(`${r.op}ed adapter '${r.adapter}' on ${r.url} in ${Math.round(r.ms)} ms`);
    else
      this.log.warn(
        `${r.op} of adapter '${r.adapter}' on ${r.url} failed after ${Math.round(r.ms)} ms: ${why}`,
      );
    for (const fn of this.listeners) fn(r);
    this.roomChanged.notify();
  }
}
