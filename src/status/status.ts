import type { ReplicaCheck } from '../doctor/check';
import type { ReplicaLoad } from '../metrics/replica-load';
import type { FleetRuntime } from '../runtime';
import type { HistoryBucket } from './history';

/** What the page's health column says of a replica. */
export type ReplicaState = 'up' | 'stale' | 'down' | 'no metrics';
/** Orders `cust-2` before `cust-10`, and `:8100` before `:8101`. */
export const naturalOrder = new Intl.Collator('en', { numeric: true }).compare;

/** The fleet as lora-poller's `.../status` route serves it (and the placement page reads it). */
export interface FleetStatus {
  now: number;
  poller: { running: boolean; polls: number; errors: number };
  /** This process: timers alive (a leak shows as growth) and heap in use. */
  process: { timers: number; heapUsedMb: number };
  /** Where decisions are made: this process (`memory`), Redis, or this node alone while Redis is away (`local`). */
  store: 'memory' | 'redis' | 'local';
  inFlight: number;
  replicas: {
    url: string;
    backend: string;
    priority: number;
    health: string;
    /** up; stale (no fresh poll lately); down; no metrics (answers, but serves no load figures). */
    state: ReplicaState;
    snapshotAgeMs: number | null;
    lastError?: string;
    waiting: number;
    running: number;
    kvUsage: number | null;
    /** As its configuration's `saturation_mode` judges it (`saturationMode`); >= 1 is saturated. */
    saturation: number;
    saturationMode: 'count' | 'predicted';
    inFlight: number;
    adapters: { name: string; state: string; inFlight: number; idleMs: number }[];
    /** `name`: what clients send for it, when a router configuration lists the file. */
    llamaAdapters: { id: number; path: string; name?: string }[];
    /**
     * Where the load figures came from: `metrics`; `slots` or `health` for llama.cpp without
     * `--metrics` (no queue figures: routing leans on in-flight counts); null before a poll.
     */
    loadFrom: string | null;
    /**
     * What the replica reports it really holds (newer vLLM), and the names on which that and the
     * registry disagree (an unloaded copy still cached, a registered adapter pushed out of the
     * cache); null when the replica does not report residency.
     */
    residency: { gpu: string[]; cpu: string[]; disagree: string[] } | null;
    /**
     * The preflight check run when the poller first met the replica (what
     * `kong-lora-router doctor` reports); null until it has finished, or where replicas are not
     * reached over HTTP.
     */
    preflight: ReplicaCheck | null;
  }[];
  /** This node's last minutes, oldest bucket first. */
  history: { bucketMs: number; buckets: HistoryBucket[] };
  events: {
    at: number;
    ageMs: number;
    url: string;
    adapter: string;
    op: string;
    result: string;
    ms?: number;
    detail?: string;
  }[];
}

export async function fleetStatus(rt: FleetRuntime, eventLimit = 50): Promise<FleetStatus> {
  const now = rt.clock.now();
  const [dump, events, inFlight] = await Promise.all([
    rt.store.dump(),
    rt.store.events(eventLimit),
    rt.store.inFlightTotal(),
  ]);
  // A replica this node left, alone on its state, is not shown (runtime-departures.ts).
  const replicas = dump.replicas.filter((r) => !rt.departed(r.url));
  const saturations = rt.saturations(replicas);
  return {
    now,
    poller: { running: rt.poller.running, ...rt.poller.stats },
    process: {
      timers: process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length,
      heapUsedMb: process.memoryUsage().heapUsed / 1024 / 1024,
    },
    store: rt.store.mode?.() ?? 'memory',
    inFlight,
    replicas: replicas.map((r, i) => ({
      url: r.url,
      backend: r.backend,
      priority: r.priority,
      health: r.health,
      state: stateOf(r, rt.poller.lastLoad.get(r.url)?.source, now, rt.poller.intervalMs),
      snapshotAgeMs: r.snapshotAt === null ? null : now - r.snapshotAt,
      lastError: r.lastError,
      waiting: r.waiting,
      running: r.running,
      kvUsage: r.kvUsage ?? null,
      saturation: saturations[i]!,
      saturationMode: rt.saturationOf(r.url).predictedMarginMs === undefined ? 'count' : 'predicted',
      inFlight: r.inFlight,
      adapters: r.adapters
        .map((a) => ({ name: a.name, state: a.state, inFlight: a.inFlight, idleMs: now - a.lastUsed }))
        .sort((a, b) => naturalOrder(a.name, b.name)),
      llamaAdapters: r.llamaAdapters.map((a) => {
        const name = rt.adapterName(a.path);
        return name === undefined ? a : { ...a, name };
      }),
      ...loadStatus(rt.poller.lastLoad.get(r.url), r.adapters),
      preflight: rt.poller.preflightChecks.get(r.url) ?? null,
    })),
    history: { bucketMs: rt.metrics.recent.bucketMs, buckets: rt.metrics.recent.series(now) },
    events: events.reverse().map((e) => ({ ...e, ageMs: now - e.at })),
  };
}

/** Where the figures came from, and residency beside the registry (see FleetStatus). */
function loadStatus(
  load: ReplicaLoad | undefined,
  adapters: { name: string; state: string }[],
): Pick<FleetStatus['replicas'][number], 'loadFrom' | 'residency'> {
  if (!load?.residency) return { loadFrom: load?.source ?? null, residency: null };
  // The registry as the router knows it; static adapters are in vLLM's cache like the others.
  const registered = new Set(adapters.filter((a) => a.state !== 'loading').map((a) => a.name));
  const held = new Set([...load.residency.cpu, ...load.residency.gpu]);
  const disagree = [...held].filter((n) => !registered.has(n));
  for (const n of registered) if (!held.has(n)) disagree.push(n);
  return { loadFrom: load.source ?? null, residency: { ...load.residency, disagree: disagree.sort() } };
}

function stateOf(
  r: { health: string; snapshotAt: number | null },
  loadFrom: string | undefined,
  now: number,
  pollMs: number,
): ReplicaState {
  if (r.health === 'down') return 'down';
  // A replica that answers but exports no load figures (llama.cpp without --metrics).
  if (loadFrom === 'slots' || loadFrom === 'health') return 'no metrics';
  // Several missed polls: the figures the router decides on are old.
  if (r.snapshotAt === null || now - r.snapshotAt > Math.max(2000, 4 * pollMs)) return 'stale';
  return 'up';
}
