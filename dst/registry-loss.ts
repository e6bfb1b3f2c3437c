/**
 * When the store read a replica restart's loss (RegistryLoss.readAt): the first poll that applied
 * the registry the restart left, which drops from the store's count the adapters it forgot.
 */
import type { RegistryLoss } from './trim-check';

/** A poll that brought a replica's registry into the state: applied at `at`, begun at `startedAt`. */
export interface RegistryRead {
  url: string;
  at: number;
  startedAt: number;
}

/** A restart that forgot adapters loaded at run time: which replica, when, and which (undefined: not known). */
export interface RestartLoss {
  url: string;
  at: number;
  names?: readonly string[];
}

/** An unload lock the store granted: on which replica's adapter, when, and when it ended (undefined: held). */
export interface UnloadLock {
  url: string;
  adapter: string;
  at: number;
  endedAt?: number;
  /** Its holder ended it done (the entry dropped then): no poll then leaves the adapter counted. */
  done?: boolean;
}

/** When a registry read first saw `loss` (Infinity: none yet). */
export function registryReadAt(
  loss: RestartLoss,
  reads: readonly RegistryRead[],
  unloadLocks: readonly UnloadLock[] = [],
): number {
  // A poll leaves an adapter under an unload lock as it is (its holder ends it), and an end as not
  // done puts it back `loaded`, dated then: a poll whose read began before, or applied while it
  // was held, leaves the forgotten adapter counted (seed 202113: fin's unload, never sent, ended
  // not done 989 ms after the first poll since the restart applied).
  const spanned = (r: RegistryRead) =>
    unloadLocks.some(
      (u) =>
        u.url === loss.url &&
        !u.done &&
        (loss.names?.includes(u.adapter) ?? true) &&
        u.at <= r.at &&
        (u.endedAt ?? Infinity) >= r.startedAt,
    );
  // Only a poll begun after the restart read the registry it left (one begun before may apply after).
  return Math.min(
    ...reads.filter((r) => r.url === loss.url && r.startedAt >= loss.at && !spanned(r)).map((r) => r.at),
    Infinity,
  );
}

/** Each restart loss with when a registry read first saw it. */
export function registryLosses(
  losses: readonly RestartLoss[],
  reads: readonly RegistryRead[],
  unloadLocks: readonly UnloadLock[] = [],
): RegistryLoss[] {
  return losses.map((l) => ({ url: l.url, at: l.at, readAt: registryReadAt(l, reads, unloadLocks) }));
}
