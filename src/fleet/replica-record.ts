/**
 * One replica as the in-process store keeps it, and how it reads as a view: `residentCount`
 * changes with every residency entry that turns resident or goes (read per request), in-flight
 * counts are kept per adapter, and an adapter unloaded or forgotten is remembered as gone so an
 * older registry cannot revive it.
 */
import type { HolderIndex } from './holder-index';
import { ResidencyTable, type ResidencyEntry } from './residency-table';
import type {
  AdapterPresence,
  AdapterRef,
  LlamaAdapter,
  ReplicaSpec,
  ReplicaView,
  ResidentAdapter,
} from './types';

export interface ReplicaRecord {
  spec: ReplicaSpec;
  health: ReplicaView['health'];
  snapshotAt: number | null;
  checkedAt: number | null;
  /** When the newest applied poll began: an older poll finishing later is not applied. */
  scrapedAt: number;
  /** The same on the polling process's monotonic clock, when the poll said (`monoStartedAt`). */
  scrapedMonoAt?: number;
  /**
   * When the poll behind the newest up verdict handed on without its figures began (seen-down.ts):
   * a failed poll begun before it is older news. Apart from `scrapedAt`: the verdict read nothing here.
   */
  verdictAt: number;
  lastError?: string;
  waiting: number;
  running: number;
  kvUsage?: number;
  residency: ResidencyTable;
  /** Non-static entries in `residency` (kept by putResidency/dropResidency: read per request). */
  residentCount: number;
  /**
   * The `loading` entries in `residency`, adapter -> since (kept by putResidency/dropResidency):
   * a view reads how many loads are under way and since when without a walk of every resident.
   */
  loads: Map<string, number>;
  llamaAdapters: LlamaAdapter[];
  /**
   * A router began a load here after a registry read was adopted: registry entries seen after this
   * are not start-up adapters.
   */
  everLoaded: boolean;
  /** A registry read was adopted (the record is new after an emptied state until then). */
  registrySeen: boolean;
  /**
   * Adapters a router began loading here before any registry read was adopted: the first read
   * classifies these as loaded, and nothing else by a load (the start-up adapters are all there).
   */
  loadedUnseen: Set<string>;
  /** The `managedVersion` static entries were last classified under. */
  classifiedUnder?: number;
  inFlight: number;
  inFlightByAdapter: Map<string, number>;
  /** Of `inFlight`, per node (the node each lease id names: types.ts `leaseNode`); a node at 0 leaves. */
  inFlightByNode: Map<string, number>;
  passiveFailures: number;
  /** When each adapter was last unloaded or forgotten here, so an older registry cannot revive it. */
  gone: Map<string, number>;
  /**
   * `gone`, and each residency entry's `since`, on the monotonic clock of the process whose store
   * this is, where it stamped them (a store handed its process's clock): matched against a poll of
   * that process (`monoStartedAt`), a step of its wall clock between the two moves neither.
   */
  goneMono: Map<string, number>;
  sinceMono: Map<string, number>;
  /**
   * Adapters being unloaded that a registry read begun since the unload's grant no longer listed:
   * gone, however the unload ends (its holder cut off, its lock ended by expiry: DST seed 826256).
   */
  missedUnloading: Set<string>;
}

/** A replica just registered: nothing polled, nothing resident, nothing in flight. */
export function newReplicaRecord(spec: ReplicaSpec, holders?: HolderIndex): ReplicaRecord {
  return {
    spec: { ...spec },
    health: 'unknown',
    snapshotAt: null,
    checkedAt: null,
    scrapedAt: -Infinity,
    verdictAt: -Infinity,
    waiting: 0,
    running: 0,
    residency: new ResidencyTable(holders),
    residentCount: 0,
    loads: new Map(),
    llamaAdapters: [],
    everLoaded: false,
    registrySeen: false,
    loadedUnseen: new Set(),
    inFlight: 0,
    inFlightByAdapter: new Map(),
    inFlightByNode: new Map(),
    passiveFailures: 0,
    gone: new Map(),
    goneMono: new Map(),
    sinceMono: new Map(),
    missedUnloading: new Set(),
  };
}

/** Bounded: entries older than the oldest scrape still in flight are useless; keep the last 256. */
export function markGone(r: ReplicaRecord, adapter: string, at: number, mono?: number): void {
  r.gone.delete(adapter);
  r.gone.set(adapter, at);
  if (mono === undefined) r.goneMono.delete(adapter);
  else r.goneMono.set(adapter, mono);
  if (r.gone.size > 256) {
    const oldest = r.gone.keys().next().value!;
    r.gone.delete(oldest);
    r.goneMono.delete(oldest);
  }
}

/** `leasedFor`: how long each adapter's oldest open lease has been held (counted ones only get it). */
export function residentsOf(r: ReplicaRecord, leasedFor?: ReadonlyMap<string, number>): ResidentAdapter[] {
  return [...r.residency.entries()].map(([name, res]) => {
    const inFlight = r.inFlightByAdapter.get(name) ?? 0;
    const held = inFlight > 0 ? leasedFor?.get(name) : undefined;
    return {
      name,
      state: res.state,
      since: res.since,
      lastUsed: res.lastUsed,
      inFlight,
      ...(held === undefined ? {} : { leasedFor: held }),
    };
  });
}

/**
 * Sets an entry, keeping `residentCount` (an entry may turn from static to loaded, never back);
 * `sinceMono`: its `since` on the store's process's monotonic clock, where it has one.
 */
export function putResidency(r: ReplicaRecord, name: string, res: ResidencyEntry, sinceMono?: number): void {
  if (sinceMono === undefined) r.sinceMono.delete(name);
  else r.sinceMono.set(name, sinceMono);
  const was = r.residency.get(name);
  if (res.state !== 'static' && (!was || was.state === 'static')) r.residentCount++;
  if (res.state === 'loading') r.loads.set(name, res.since);
  else if (r.loads.size > 0) r.loads.delete(name);
  r.residency.set(name, res);
}

export function dropResidency(r: ReplicaRecord, name: string): void {
  r.sinceMono.delete(name);
  const was = r.residency.get(name);
  if (was && r.residency.delete(name) && was.state !== 'static') r.residentCount--;
  if (r.loads.size > 0) r.loads.delete(name);
}

/** When the oldest load under way began: few are under way at once, so a walk of them. */
function oldestLoad(r: ReplicaRecord): number | undefined {
  if (r.loads.size === 0) return undefined;
  let oldest = Infinity;
  for (const since of r.loads.values()) if (since < oldest) oldest = since;
  return oldest;
}

/**
 * `mark`: the adapter's HolderIndex mark (its slot on each replica found without a lookup per
 * replica). `node`: the node reading it, whose leases `ownInFlight` counts (none: not told).
 */
export function replicaView(
  r: ReplicaRecord,
  adapter?: AdapterRef,
  mark?: number,
  node?: string,
): ReplicaView {
  const residentCount = r.residentCount;
  // Not returned as a literal: the scheduler's fields below are not ReplicaView's.
  const view = {
    url: r.spec.url,
    backend: r.spec.backend,
    priority: r.spec.priority,
    health: r.health,
    snapshotAt: r.snapshotAt,
    checkedAt: r.checkedAt,
    lastError: r.lastError,
    waiting: r.waiting,
    running: r.running,
    kvUsage: r.kvUsage,
    inFlight: r.inFlight,
    ownInFlight: node === undefined ? undefined : (r.inFlightByNode.get(node) ?? 0),
    residentCount,
    loadsUnderWay: r.loads.size > 0 ? r.loads.size : undefined,
    loadsSince: oldestLoad(r),
    adapter: adapter ? presence(r, adapter, mark) : undefined,
    llamaIds: r.spec.backend === 'llamacpp' ? r.llamaAdapters.map((a) => a.id) : undefined,
    residents: undefined,
    // Room for what the scheduler completes a view with, in place (src/scheduler/pipeline.ts
    // `toCandidate`): fields added later would each grow a properties store per view per request.
    saturation: undefined,
    stale: undefined,
    holder: undefined,
    ttftMs: undefined,
    loadMs: undefined,
    fixedMs: undefined,
    ownMs: undefined,
    prefixTokens: undefined,
    cachedTokens: undefined,
  };
  return view;
}

function presence(r: ReplicaRecord, a: AdapterRef, mark: number | undefined): AdapterPresence | undefined {
  const inFlight = r.inFlightByAdapter.size === 0 ? 0 : (r.inFlightByAdapter.get(a.name) ?? 0);
  if (r.spec.backend === 'llamacpp') {
    const hit = a.path === undefined ? undefined : r.llamaAdapters.find((e) => samePath(e.path, a.path!));
    return hit ? { state: 'static', lastUsed: 0, inFlight, llamaId: hit.id } : undefined;
  }
  const slot = mark === undefined ? r.residency.slotOf(a.name) : r.residency.markedSlot(mark);
  return slot === undefined
    ? undefined
    : { state: r.residency.stateAt(slot), lastUsed: r.residency.lastUsedAt(slot), inFlight };
}

/** llama.cpp lists the path it was started with: match it whole, or by file name. */
export function samePath(listed: string, configured: string): boolean {
  return listed === configured || baseName(listed) === baseName(configured);
}

function baseName(p: string): string {
  return p.slice(p.lastIndexOf('/') + 1);
}
