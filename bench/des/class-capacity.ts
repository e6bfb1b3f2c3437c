/**
 * Issue 34: is a missed interactive point of the classes part (1 s loads, 70% load) past what
 * the fleet gives once its loads are paid? On one point, the same requests:
 * - lora-router with the classes: each class within its objective, its loads (through the API and
 *   the engines' host-cache reloads) and the engine time the requests and loads take; of the
 *   interactive requests' time in the gateway, how much was the hold (every replica predicted past
 *   the objective: room-wait.ts `holds`), the rest waiting for room or a load under way;
 * - the loads one cache of the fleet's slots makes (Belady's minimum, least recently used, least
 *   frequently used: what an online cache that counts requests may reach);
 * - the fleet pooled in one engine paying each of those loads (load-anatomy.ts
 *   `pooledWithBeladyLoads`: each miss waits its own load and stops the pooled engine for load
 *   time / replicas), first come first served and with interactive requests first in the engine
 *   (vLLM's priority scheduling): perfect balance, so no placement on the fleet does better with
 *   as many loads;
 * - the interactive requests alone (batch removed) through lora-router.
 *
 * `node dist/bench/des/class-capacity.js LOAD_MS LOAD SEED TRACE` (after `npm run build`).
 */
import { RoomWait } from '../../src/router/room-wait';
import { CLASS_POLICY } from '../goals';
import { TWO_CLASSES } from '../workloads';
import { beladyMissFlags, pooledWithBeladyLoads } from './load-anatomy';
import { classMisses } from './class-misses';
import * as P from './policies';
import { runPolicy, type PolicyResult } from './run';
import { conversationClassPointFromArgs } from './slo-classes';

/** Per request, whether one least-recently-used cache of `capacity` adapters loads its adapter. */
export function lruMissFlags(sequence: readonly string[], capacity: number): boolean[] {
  const cached = new Set<string>();
  return sequence.map((a) => {
    const miss = !cached.delete(a);
    if (miss && cached.size >= capacity) cached.delete(cached.values().next().value!);
    cached.add(a);
    return miss;
  });
}

/**
 * The same with the least frequently asked-for adapter going (requests counted from the start,
 * the least recently used among equals): a popularity that does not drift, as Zipf's here, is
 * what counting learns.
 */
export function lfuMissFlags(sequence: readonly string[], capacity: number): boolean[] {
  const count = new Map<string, number>();
  const last = new Map<string, number>();
  const cached = new Set<string>();
  return sequence.map((a, i) => {
    count.set(a, (count.get(a) ?? 0) + 1);
    last.set(a, i);
    if (cached.has(a)) return false;
    if (cached.size >= capacity) {
      let victim = '';
      for (const c of cached)
        if (
          victim === '' ||
          count.get(c)! < count.get(victim)! ||
          (count.get(c) === count.get(victim) && last.get(c)! < last.get(victim)!)
        )
          victim = c;
      cached.delete(victim);
    }
    cached.add(a);
    return true;
  });
}

/** Gateway holds (room-wait.ts `holds` true until it turns false), summed per class priority. */
function recordHolds(): { heldMs: Map<number, number>; restore: () => void } {
  const heldMs = new Map<number, number>();
  const since = new WeakMap<RoomWait, number>();
  const holds = RoomWait.prototype.holds;
  RoomWait.prototype.holds = function (this: RoomWait, ...args: Parameters<RoomWait['holds']>) {
    const held = holds.apply(this, args);
    const now = args[0];
    const from = since.get(this);
    if (held && from === undefined) since.set(this, now);
    if (!held && from !== undefined) {
      heldMs.set(this.priority, (heldMs.get(this.priority) ?? 0) + now - from);
      since.delete(this);
    }
    return held;
  };
  return { heldMs, restore: () => void (RoomWait.prototype.holds = holds) };
}

const within = (r: PolicyResult, classes: readonly string[], name: string, ms: number) => {
  const xs = r.ttftOf!.filter((_, i) => classes[i] === name);
  return `${((100 * xs.filter((x) => x <= ms).length) / xs.length).toFixed(1)}%`;
};

async function main(): Promise<void> {
  const { load, s, arrivals, adapters, classes } = conversationClassPointFromArgs(process.argv.slice(2));
  const [interactive, batch] = TWO_CLASSES.classes;
  const config = { slo_classes: TWO_CLASSES.classes, default_slo_class: 'interactive' };
  const loadMs = s.loadMs!;
  const spanMs = arrivals.at(-1)!.at - arrivals[0]!.at;
  const engineTime = (loads: number, share = load) =>
    Number((share + (loads * loadMs) / (s.replicas * spanMs)).toFixed(3));
  const both = (r: PolicyResult, cs: readonly string[] = classes) => ({
    interactive: within(r, cs, interactive!.name, interactive!.ttft_ms),
    batch: within(r, cs, batch!.name, batch!.ttft_ms),
  });

  const holds = recordHolds();
  const { result: mine, timelines } = await classMisses(
    P.loraRouter(CLASS_POLICY, config),
    s,
    arrivals,
    adapters,
    classes,
  );
  holds.restore();
  let gatewayMs = 0;
  timelines.forEach((t, i) => {
    if (t && classes[i] === interactive!.name) gatewayMs += t.routed - t.at;
  });

  const slots = s.replicas * s.slots;
  const caches = {
    belady: beladyMissFlags(adapters, slots),
    lfu: lfuMissFlags(adapters, slots),
    lru: lruMissFlags(adapters, slots),
  };
  const pooled: Record<string, unknown> = {};
  for (const [name, misses] of Object.entries(caches)) {
    const loads = misses.filter(Boolean).length;
    const row: Record<string, unknown> = { loads, engineTime: engineTime(loads) };
    for (const policy of ['fcfs', 'priority'] as const) {
      const engine = policy === 'priority' ? { schedulingPolicy: policy } : {};
      const ref = pooledWithBeladyLoads(loadMs, s.replicas, arrivals, misses);
      const index = new Map(arrivals.map((a, i) => [a, i]));
      // vLLM's priority: lower first; the batch class after the interactive one.
      const classed: P.Policy = {
        ...ref,
        create(clock, fleet, seed, n) {
          const r = ref.create(clock, fleet, seed, n);
          return {
            ...r,
            route: async (req) => {
              const out = await r.route(req);
              return 'error' in out
                ? out
                : { ...out, priority: classes[index.get(req.arrival)!] === 'batch' ? 1 : 0 };
            },
          };
        },
      };
      const r = await runPolicy(policy === 'priority' ? classed : ref, { ...s, engine }, arrivals, adapters, {
        classes,
      });
      row[policy] = both(r);
    }
    pooled[name] = row;
  }

  const keep = classes.map((c) => c === interactive!.name);
  const alone = await runPolicy(
    P.loraRouter(CLASS_POLICY, config),
    s,
    arrivals.filter((_, i) => keep[i]),
    adapters.filter((_, i) => keep[i]),
    { classes: classes.filter((_, i) => keep[i]) },
  );
  const share = keep.filter(Boolean).length / keep.length;
  console.log(
    JSON.stringify({
      loadMs,
      load,
      seed: s.seed,
      adapters: new Set(adapters).size,
      router: {
        ...both(mine),
        loads: mine.loads,
        engineReloads: mine.engineReloads,
        engineTime: engineTime(mine.loads),
        interactiveGatewayS: Math.round(gatewayMs / 1000),
        interactiveHeldS: Math.round((holds.heldMs.get(interactive!.priority) ?? 0) / 1000),
      },
      pooled,
      interactiveAlone: {
        interactive: within(
          alone,
          classes.filter((_, i) => keep[i]),
          interactive!.name,
          interactive!.ttft_ms,
        ),
        loads: alone.loads,
        engineTime: engineTime(alone.loads, load * share),
      },
    }),
  );
}

if (require.main === module) void main();
