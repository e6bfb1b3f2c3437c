/**
 * Dynamo's LoRA placement controller with its min-cost-flow solver (ai-dynamo/dynamo
 * lib/llm/src/lora/routing/mcf_allocator.rs 11d568d78b, min_cost_flow.rs f0503daf7c, controller.rs
 * 0a8cd5a4b8 `recompute_mcf`; PR 8179, merged 2026-04; no release tag checked, the repository is
 * too large to fetch here). Every tick (3 s) the demand sizing of ./dynamo-demand.ts gives each
 * active adapter its replicas (after hysteresis), every other adapter a worker holds gets 1, and
 * one solve places them all: adapter -> worker edges among its HRW top-M (16) workers and its
 * prior hosts, cost alpha x HRW rank + gamma (1000) for a new copy or - beta (250) for a kept one,
 * each worker taking at most its slots, what does not fit overflowing to a dummy worker.
 * Not modelled: delta freezing (every tick solves every adapter; with the keep reward an
 * unchanged adapter keeps its hosts all the same), the dense retry (with 8 workers and M = 16 the
 * graph is dense already).
 * Upstream the table only steers requests and a worker loads on the first request it gets; here,
 * as issue 34 asks of a placement controller, the tick also drives the loads and unloads: it loads
 * each placed adapter its worker lacks and unloads what it no longer places (when idle there), so
 * loads run ahead of the requests. Requests route as in Dynamo (least outstanding tokens within
 * the adapter's set) and still resolve an adapter the controller has not loaded.
 */
import type { DesFleet } from '../fleet';
import type { Policy } from '../policies';
import { DYNAMO_TICK_MS, dynamoDemand, dynamoRouter, hrwRanked, hysteresis } from './dynamo-demand';
import { MinCostFlow } from './min-cost-flow';

/** McfSolveParams' defaults. */
export const MCF_PARAMS = {
  candidateM: 16,
  alphaPref: 1,
  gammaLoad: 1000,
  betaKeep: 250,
  overflowCost: 1e12,
};

export interface McfLora {
  name: string;
  replicas: number;
  /** Workers in HRW order for it, best first. */
  ranked: number[];
}

/**
 * One placement solve: adapter name -> the workers it is placed on (each worker at most
 * `capacity[w]` adapters), and how many replicas overflowed.
 */
export function mcfPlace(
  capacity: number[],
  loras: McfLora[],
  prev: Map<string, Set<number>>,
  p = MCF_PARAMS,
): { assignment: Map<string, Set<number>>; overflow: number } {
  const S = 0;
  const T = 1;
  const O = 2;
  const lora = (k: number) => 3 + k;
  const worker = (w: number) => 3 + loras.length + w;
  const g = new MinCostFlow(3 + loras.length + capacity.length);
  const placed: { k: number; w: number; edge: number }[] = [];
  loras.forEach((l, k) => {
    g.edge(S, lora(k), l.replicas, 0);
    g.edge(lora(k), O, l.replicas, p.overflowCost);
    const before = prev.get(l.name) ?? new Set<number>();
    const candidates = new Set([...l.ranked.slice(0, Math.max(p.candidateM, l.replicas)), ...before]);
    for (const w of candidates) {
      const rank = l.ranked.indexOf(w);
      const cost = p.alphaPref * rank + (before.has(w) ? -p.betaKeep : p.gammaLoad);
      placed.push({ k, w, edge: g.edge(lora(k), worker(w), 1, cost) });
    }
  });
  capacity.forEach((c, w) => g.edge(worker(w), T, c, 0));
  const total = loras.reduce((n, l) => n + l.replicas, 0);
  g.edge(O, T, total, 0);
  g.solve(S, T, total);
  const assignment = new Map<string, Set<number>>();
  let onWorkers = 0;
  for (const x of placed) {
    if (g.flow(x.edge) === 0) continue;
    const name = loras[x.k]!.name;
    assignment.set(name, (assignment.get(name) ?? new Set()).add(x.w));
    onWorkers++;
  }
  return { assignment, overflow: total - onWorkers };
}

export const dynamoMcf: Policy = {
  name: 'Dynamo min-cost-flow placement, loads ahead',
  mode: 'resolver',
  create(clock, fleet, seed, slots) {
    const n = fleet.urls.length;
    const demand = dynamoDemand(clock, n, slots);
    const sizes = new Map<string, { replicas: number; lastScaleDown?: number }>();
    let assignment = new Map<string, Set<number>>();
    /** Loads issued and not done (`worker adapter`): a slow load is not issued twice. */
    const loading = new Set<string>();
    let tick = 0;
    const recompute = () => {
      tick++;
      const desired = demand.desired();
      const held = fleet.urls.map((_, i) => new Set(fleet.registeredOn(i)));
      const loras: McfLora[] = [];
      for (const [name, want] of desired) {
        const s = hysteresis(want, sizes.get(name)?.replicas ?? 0, sizes.get(name)?.lastScaleDown, tick);
        sizes.set(name, s);
        loras.push({ name, replicas: s.replicas, ranked: hrwRanked(name, fleet.urls) });
      }
      // Known but idle: held somewhere (the state tracker's list), one replica, no cooldown.
      const idle = new Set(held.flatMap((h) => [...h]).filter((a) => !desired.has(a)));
      for (const name of idle) {
        sizes.delete(name);
        loras.push({ name, replicas: 1, ranked: hrwRanked(name, fleet.urls) });
      }
      loras.sort((a, b) => (a.name < b.name ? -1 : 1));
      assignment = mcfPlace(
        fleet.urls.map(() => slots),
        loras,
        assignment,
      ).assignment;
      drive(fleet, held, assignment, loading);
    };
    let cancel = clock.after(DYNAMO_TICK_MS, function loop() {
      recompute();
      cancel = clock.after(DYNAMO_TICK_MS, loop);
    });
    const router = dynamoRouter(
      fleet,
      seed,
      (a) => (assignment.has(a) ? [...assignment.get(a)!] : undefined),
      demand,
    );
    return { ...router, stop: () => cancel() };
  },
};

/**
 * Makes the workers hold what the solve placed: first unloads what a worker holds and no longer
 * hosts (unless requests of it are in the engine there: a busy unload is never made), then loads
 * what it hosts and lacks, without waiting (each load stops that engine for its load time).
 */
function drive(
  fleet: DesFleet,
  held: Set<string>[],
  assignment: Map<string, Set<number>>,
  loading: Set<string>,
): void {
  held.forEach((names, i) => {
    for (const a of names)
      if (!assignment.get(a)?.has(i) && fleet.engines[i]!.inFlight(a) === 0)
        void fleet.unloadAdapter(fleet.urls[i]!, a);
  });
  for (const [a, workers] of assignment)
    for (const i of workers) {
      const key = `${i} ${a}`;
      if (held[i]!.has(a) || loading.has(key)) continue;
      loading.add(key);
      void fleet.loadAdapter(fleet.urls[i]!, a).finally(() => loading.delete(key));
    }
}
