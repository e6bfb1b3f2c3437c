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

/** A restart that forgot adapters loaded at run time: which replica, when. */
export interface RestartLoss {
  url: string;
  at: number;
}

/** When a registry read first saw `loss` (Infinity: none yet). */
export function registryReadAt(loss: RestartLoss, reads: readonly RegistryRead[]): number {
  // Only a poll begun after the restart read the registry it left (one begun before may apply after).
  return Math.min(
    ...reads.filter((r) => r.url === loss.url && r.startedAt >= loss.at).map((r) => r.at),
    Infinity,
  );
}

/** Each restart loss with when a registry read first saw it. */
export function registryLosses(
  losses: readonly RestartLoss[],
  reads: readonly RegistryRead[],
): RegistryLoss[] {
  return losses.map((l) => ({ ...l, readAt: registryReadAt(l, reads) }));
}
