import type { Limits, WorldView } from '../../dst/invariants';
import type { AdapterLogEntry } from '../../sim/http/replica';
import type { ReplicaApi } from '../../src/backends/replica-api';
import { Poller } from '../../src/fleet/poller';
import { DegradableFleetStore } from '../../src/fleet/redis/degradable-store';
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import type { FleetStore } from '../../src/fleet/store';
import type { ReplicaSpec } from '../../src/fleet/types';
import { EngineLoads } from '../../src/work/engine-loads';

/** The limits of a three-node simulated world, as the log checks' tests give them (dst/invariants.ts). */
export function dstLimits(maxLoadedAdapters: number, coldLoadsPerMinute = 100): Limits {
  return { maxLoadedAdapters, nodes: 3, coldLoadsPerMinute, excessGraceMs: 5000, quietAfterMs: 4000 };
}

/** A world with no fault, no node deciding alone and no reset: nothing excuses a break. */
export const QUIET: WorldView = { now: 10_000, step: 1, degraded: false, lastFaultAt: -Infinity, resets: [] };

/** A load the replica answered 200 at `at`, leaving `loaded` in its registry. */
export const loadEntry = (at: number, name: string, loaded: number): AdapterLogEntry => ({
  at,
  op: 'load',
  name,
  status: 200,
  ms: 100,
  loaded,
});

/** An unload the replica answered 200 at `at` with nothing in flight, leaving `loaded`. */
export const unloadEntry = (
  at: number,
  name: string,
  loaded: number,
  extra: Partial<AdapterLogEntry> = {},
): AdapterLogEntry => ({
  at,
  op: 'unload',
  name,
  status: 200,
  ms: 5,
  inFlight: 0,
  running: 0,
  waiting: 0,
  loaded,
  ...extra,
});

/**
 * Sets aside two changes (2026-12-06) that moved the simulation's schedules, neither of them what
 * a planted-bug replay plants: loads under way counted across nodes (EngineLoads.count read as
 * unbounded: no other node's load is counted) and a node's own registration after an emptied
 * state taking its leases back (FailoverFleetStore's override). A seed found breaking a plant
 * before them replays as found, as the 10241 case sets aside the batch `retake`. Returns the undo.
 */
export function setAsideScheduleMoves(): () => void {
  const count = Object.getOwnPropertyDescriptor(EngineLoads.prototype, 'count')!;
  const upsert = Object.getOwnPropertyDescriptor(FailoverFleetStore.prototype, 'upsertReplica')!;
  EngineLoads.prototype.count = () => Infinity;
  Reflect.deleteProperty(FailoverFleetStore.prototype, 'upsertReplica');
  return () => {
    Object.defineProperty(EngineLoads.prototype, 'count', count);
    Object.defineProperty(FailoverFleetStore.prototype, 'upsertReplica', upsert);
  };
}

/**
 * Sets aside the poller's order since branch poll-specs, which moved the simulation's schedules: a
 * round read the replica list and then polled (no list kept from the last round, no local copy read
 * before the first), and a poll read the shared clock and then scraped, dating itself by the answer
 * as read. The poll's own code runs as it is. A seed found breaking a plant before it replays as
 * found. Returns the undo.
 */
export function setAsidePollOrder(): () => void {
  type Listing = { specs: ReplicaSpec[] | null; answered: Promise<ReplicaSpec[]> };
  type Inner = {
    store: FleetStore;
    api: ReplicaApi;
    readSpecs(): Listing;
    sharedStart(started: number): Promise<number | undefined>;
  };
  const proto = Poller.prototype as unknown as Inner;
  const readSpecs = Object.getOwnPropertyDescriptor(proto, 'readSpecs')!;
  const sharedStart = Object.getOwnPropertyDescriptor(proto, 'sharedStart')!;
  const localSpecs = Object.getOwnPropertyDescriptor(DegradableFleetStore.prototype, 'localReplicaSpecs')!;
  Reflect.deleteProperty(DegradableFleetStore.prototype, 'localReplicaSpecs');
  // A poll calls its scrape right after `sharedStart`, with no await between: the scrape takes
  // the read begun last and waits for it.
  const gated = new WeakMap<ReplicaApi, { read: Promise<unknown> }>();
  proto.readSpecs = function (this: Inner) {
    const read: Listing = { specs: null, answered: this.store.replicaSpecs() };
    read.answered = read.answered.then((specs) => (read.specs = specs));
    return read;
  };
  proto.sharedStart = function (this: Inner) {
    let gate = gated.get(this.api);
    if (!gate) {
      const g = { read: Promise.resolve() as Promise<unknown> };
      const scrape = this.api.scrape.bind(this.api);
      this.api.scrape = async (spec, timeoutMs) => {
        await g.read;
        return scrape(spec, timeoutMs);
      };
      gated.set(this.api, g);
      gate = g;
    }
    const read = this.store.sharedTime?.().catch(() => undefined) ?? Promise.resolve(undefined);
    gate.read = read;
    return read;
  };
  return () => {
    Object.defineProperty(proto, 'readSpecs', readSpecs);
    Object.defineProperty(proto, 'sharedStart', sharedStart);
    Object.defineProperty(DegradableFleetStore.prototype, 'localReplicaSpecs', localSpecs);
  };
}
