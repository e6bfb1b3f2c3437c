/**
 * The world's watch on src/lease.ts's process-wide lease map: every lease id handed out (swept
 * at a run's end), the runtime that handed out each, and every second release (LeaseNotOpen),
 * counted by wrapping release once.
 */
import { LeaseHandle, LeaseNotOpen } from '../src/lease';
import { FleetRuntime } from '../src/runtime';

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
/**
 * The runtime that handed out each lease id: a same-state successor shares its predecessor's
 * prefix and sequence (src/runtime-registry.ts), so the id's prefix alone names neither.
 */
const issuers = new Map<string, FleetRuntime>();
const nextLeaseId = FleetRuntime.prototype.nextLeaseId;
FleetRuntime.prototype.nextLeaseId = function (this: FleetRuntime) {
  const id = nextLeaseId.call(this);
  issuers.set(id, this);
  return id;
};

/** The runtime that handed out lease `id` this run, if any did. */
export function leaseIssuer(id: string): FleetRuntime | undefined {
  return issuers.get(id);
}

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
  issuers.clear();
}
