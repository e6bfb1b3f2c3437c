/**
 * The end of a schedule: when the world is quiescent (nothing left that could change what the
 * lease check sees), and the checks then: every request answered, no lease left open.
 */
import type { FailoverFleetStore } from '../src/fleet/redis/failover-store';
import type { Violation, WorldView } from './invariants';
import type { NodeProcesses } from './node-processes';
import type { WorldFaults } from './world-faults';
import { PROBE_MS } from './world-timings';

/**
 * Quiescent: no request under way, no fault open or recent (a heartbeat or a probe still to find
 * its end), no record change still to reach a node, every live runtime sharing decisions again with
 * nothing held or owed (its lease list empty, no release to replay), no replica over the limit
 * (`overLimit`: its grace still running), and no lease open.
 */
export async function settled(
  now: number,
  nodes: NodeProcesses,
  faults: WorldFaults,
  overLimit: () => boolean,
): Promise<boolean> {
  if (nodes.liveOpen() > 0 || faults.open > 0 || faults.pushesPending > 0) return false;
  if (now - faults.lastFaultAt < PROBE_MS || overLimit()) return false;
  for (const p of nodes.procs)
    if (p.alive)
      for (const rt of p.runtimes) {
        const store = rt.store as FailoverFleetStore;
        if (store.mode() !== 'redis' || store.unloadsHeldOff()) return false;
        // The lease list is the failover store's own (private): read here, never changed.
        const held = (
          store as unknown as { leases: { mine: Map<string, unknown>; pendingReleases: Set<string> } }
        ).leases;
        if (held.mine.size > 0 || held.pendingReleases.size > 0) return false;
      }
  return (await nodes.openLease()) === null;
}

/**
 * Every request ended and the world settled: no live node holds a lease, in Redis or alone. The
 * violation, or undefined. `inFlight`: requests under way at any node, a dead process's too.
 */
export async function quiescence(
  w: WorldView,
  nodes: NodeProcesses,
  inFlight: number,
): Promise<Violation | undefined> {
  if (inFlight > 0 && nodes.liveOpen() === 0) return undefined; // a dead process's request still runs
  const unanswered = nodes.liveOpen();
  const open = unanswered > 0 ? null : await nodes.openLease();
  if (unanswered > 0)
    return {
      invariant: 'every request answered',
      detail: `${unanswered} request(s) unanswered 70 s after the last came`,
      at: w.now,
      step: w.step,
    };
  if (open !== null)
    return {
      invariant: 'no lease left open after quiescence',
      detail: open,
      at: w.now,
      step: w.step,
    };
  return undefined;
}
