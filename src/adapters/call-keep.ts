import { wakeAfter, type Clock } from '../clock';
import type { Logger } from '../log';
import type { KeepLease } from './policy';

/**
 * Runs `run`, asking `keep` (AdapterPolicy.keepLease) every `everyMs` on the clock until it settles.
 * For a load's whole life (AdapterManager.ensure): one replica call there (the load, an unload
 * for room, a replica read) has no wake of its own, nor has a load queued behind it, and a lease
 * past `lease_max_age_ms` may be reclaimed by the store's sweep meanwhile; the replica's in-flight
 * count then lacks its request while the load runs, and another node decides on that count.
 * A fresh lease being taken is not awaited here: the load's own asks (before its lock, before it
 * turns `loaded`) and the caller await it. A keep that fails is logged, never the load's failure.
 */
export async function keptDuring<T>(
  clock: Clock,
  everyMs: number,
  keep: KeepLease | undefined,
  log: Logger,
  run: () => Promise<T>,
): Promise<T> {
  if (!keep) return run();
  let stopped = false;
  const failed = (err: unknown) =>
    log.warn(`could not keep a lease young during a load: ${(err as Error)?.message ?? String(err)}`);
  const wake = () => {
    if (stopped) return;
    try {
      keep()?.catch(failed);
    } catch (err) {
      failed(err);
    }
    cancel = wakeAfter(clock, everyMs, wake);
  };
  let cancel = wakeAfter(clock, everyMs, wake);
  try {
    return await run();
  } finally {
    stopped = true;
    cancel();
  }
}
