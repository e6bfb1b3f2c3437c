/**
 * Issue 34, interactive at 1 s loads and 70% load: is the collapse a cascade the router causes
 * (each load stops a replica, its queue grows, more requests spread and load again) or the loads
 * the workload's adapter popularity needs? Per policy, on the same requests and classes: each
 * class within its objective; loads per served request, per second per replica, and the share of
 * each replica's time its engine was stopped by them (mean and the busiest replica); copies (a load
 * of an adapter another replica held then); the requests running or waiting on the engine when a
 * load was asked for (each waits for it); and the run cut in windows of the arrivals, to see
 * where loads and late requests start to grow. Per seed, what any placement needs: one load per
 * adapter the requests name (the fleet starts empty), Belady's loads (one cache of replicas x
 * slots, with foresight: the fewest), and least recently used on that one cache (an online cache).
 *
 * `node dist/bench/des/class-cascade.js LOAD_MS LOAD SEEDS TRACE [CONFIG_JSON [POLICIES]]` (after
 * `npm run build`); CONFIG_JSON: more of lora-router's configuration (a lever on trial); POLICIES:
 * `all` (default: the classes, the same with free loads, one class and the peers) or `router`.
 */
import { CLASS_POLICY, CLASS_VARIANT_ONE } from '../goals';
import { TWO_CLASSES } from '../workloads';
import { beladyMisses } from './belady';
import { freeLoads } from './bounds';
import type { DesFleet } from './fleet';
import { recordedLoads, type LoadTimes } from './load-anatomy';
import { dynamoDemandSized } from './baselines-2026';
import { dynamoMcf } from './peers/dynamo-mcf';
import { llmdPredictedLatency, llmdResidency } from './peers/llm-d';
import * as P from './policies';
import { runPolicy } from './run';
import { conversationClassPoint } from './slo-classes';

type Load = LoadTimes & { requests: number; copy: boolean };

const WINDOWS = 5;

async function main(): Promise<void> {
  const [loadMs = '1000', load = '0.7', seeds = '1', trace, config = '{}', which = 'all'] =
    process.argv.slice(2);
  const extra = JSON.parse(config) as Record<string, unknown>;
  const classConfig = { slo_classes: TWO_CLASSES.classes, default_slo_class: 'interactive', ...extra };
  const classed = P.loraRouter(CLASS_POLICY, classConfig);
  const policies =
    which === 'router'
      ? [classed]
      : [
          classed,
          freeLoads(classed),
          P.loraRouter(CLASS_VARIANT_ONE, extra),
          llmdResidency,
          llmdPredictedLatency,
          dynamoMcf,
          dynamoDemandSized,
        ];
  for (const seed of seeds.split(',').map(Number)) {
    const { s, arrivals, adapters, classes } = conversationClassPoint(
      Number(loadMs),
      Number(load),
      seed,
      trace,
    );
    const spanMs = arrivals.at(-1)!.at - arrivals[0]!.at;
    const cache = s.replicas * s.slots;
    const stoppedBy = (loads: number) => pct((loads * s.loadMs!) / (s.replicas * spanMs));
    const needs = (what: string, loads: number) =>
      `${what} ${loads} (${(loads / arrivals.length).toFixed(3)} a request, engines stopped ${stoppedBy(loads)} of the time)`;
    console.log(
      `seed ${seed}: ${arrivals.length} requests over ${(spanMs / 1000).toFixed(0)} s; loads: ${[
        needs('one per adapter named', new Set(adapters).size),
        needs("Belady's", beladyMisses(adapters, cache)),
        needs('least recently used', lruMisses(adapters, cache)),
      ].join(', ')}`,
    );
    for (const policy of policies) {
      const loads: Load[] = [];
      let fleet: DesFleet | undefined;
      const traced = recordedLoads(policy, loads, (f, i, adapter) => {
        const q = f.engines[i]!.queueView();
        const copy = f.urls.some((_, j) => j !== i && f.registeredOn(j).includes(adapter));
        return { requests: q.running.length + q.waiting.length, copy };
      });
      const r = await runPolicy(traced, s, arrivals, adapters, { classes, fleet: (f) => void (fleet = f) });
      const within = (c: (typeof TWO_CLASSES.classes)[number], from = 0, to = Infinity) => {
        let n = 0;
        let ok = 0;
        r.ttftOf!.forEach((t, i) => {
          const at = arrivals[i]!.at;
          if (classes[i] !== c.name || at < from || at >= to) return;
          n++;
          if (t <= c.ttft_ms) ok++;
        });
        return n === 0 ? '-' : pct(ok / n);
      };
      const [interactive, batch] = TWO_CLASSES.classes;
      // Loads per replica: through the API or the resolver (recorded), and reloads in the engine loop.
      const perReplica = fleet!.urls.map(
        (u, i) => loads.filter((l) => l.url === u).length + fleet!.engines[i]!.stats().cacheMissLoads,
      );
      const total = perReplica.reduce((a, b) => a + b, 0);
      const stopped = perReplica.map((n) => (n * (policy.loadMs ?? s.loadMs!)) / spanMs);
      const perS = perReplica.map((n) => n / (spanMs / 1000));
      const copies = loads.filter((l) => l.copy).length;
      const stalled = loads.reduce((n, l) => n + l.requests, 0);
      const t0 = arrivals[0]!.at;
      const w = spanMs / WINDOWS;
      const windows = Array.from({ length: WINDOWS }, (_, k) => {
        const from = t0 + k * w;
        const to = k === WINDOWS - 1 ? Infinity : from + w;
        const ls = loads.filter((l) => l.asked >= from && l.asked < to);
        const mean = ls.length === 0 ? 0 : ls.reduce((n, l) => n + l.requests, 0) / ls.length;
        return `${ls.length} loads (${ls.filter((l) => l.copy).length} copies, ${mean.toFixed(1)} requests on the engine), interactive ${within(interactive!, from, to)}`;
      });
      console.log(
        [
          `  ${policy.name}: interactive ${within(interactive!)} in 2 s, batch ${within(batch!)} in 30 s, refused ${r.refused}`,
          `    loads ${total} (${(total / r.completed).toFixed(3)} a served request; ${copies} copies; engine reloads ${r.engineReloads}), per replica ${fmt(mean(perS), 3)}/s (max ${fmt(Math.max(...perS), 3)}), engine stopped ${pct(mean(stopped))} of the time (max ${pct(Math.max(...stopped))})`,
          `    requests on the engine when a load was asked for: ${fmt(stalled / Math.max(1, loads.length), 1)} a load (${stalled} in all)`,
          ...windows.map((x, k) => `    window ${k + 1}/${WINDOWS}: ${x}`),
        ].join('\n'),
      );
    }
  }
}

/** Loads of one least-recently-used cache of `capacity` adapters serving `sequence`. */
function lruMisses(sequence: readonly string[], capacity: number): number {
  const cached = new Set<string>();
  let misses = 0;
  for (const a of sequence) {
    // A Set iterates in insertion order: re-inserted on use, its first is the least recent.
    if (cached.delete(a)) cached.add(a);
    else {
      misses++;
      if (cached.size >= capacity) cached.delete(cached.values().next().value!);
      cached.add(a);
    }
  }
  return misses;
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const fmt = (x: number, d: number) => x.toFixed(d);
const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

if (require.main === module) void main();
