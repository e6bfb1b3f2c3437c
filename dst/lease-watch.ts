/**
 * The world's watch on src/lease.ts's process-wide lease map: every lease id handed out (swept
 * at a run's end) and every second release (LeaseNotOpen), counted by wrapping release once.
 */
import { LeaseHandle, LeaseNotOpen } from '../src/lease';

/** Every lease id the world handed out, for the end-of-run sweep of the process-wide map. */
const handed = new Set<string>();
/** A second release anywhere in src/ (LeaseNotOpen) is a violation. */
let secondReleases: string[] = [];
const take = LeaseHandle.take.bind(LeaseHandle);
LeaseHandle.take = async (...args: Parameters<typeof LeaseHandle.take>) => {
  const id = `${args[0].leasePrefix}-${args[0].leaseSeq.next.toString(36)}`;
  handed.add(id);
  return take(...args);
};
const release = LeaseHandle.prototype.release;
LeaseHandle.prototype.release = async function (this: LeaseHandle, status?: number) {
  try {
    return await release.call(this, status);
  } catch (err) {
    if (err instanceof LeaseNotOpen) secondReleases.push(err.leaseId);
    throw err;
  }
};

/** A run starts: no second release seen yet. */
export function clearSecondReleases(): void {
  secondReleases = [];
}

/** The lease of the first second release seen this run, if any. */
export function firstSecondRelease(): string | undefined {
  return secondReleases.length > 0 ? secondReleases[0] : undefined;
}

/** The process-wide lease map outlives a schedule: forget this world's leases. */
export function forgetHandedLeases(): void {
  for (const id of handed) LeaseHandle.find(id)?.agedOut();
  handed.clear();
}
