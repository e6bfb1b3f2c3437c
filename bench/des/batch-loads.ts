/**
 * Issue 34's load diagnosis: which class's requests make the adapter loads that stall the engines,
 * and how much of the late interactive requests' time those loads took. Each load is put down to
 * the request that asked for it (the latest of its adapter sent to that replica when it was
 * asked); each late interactive request's engine stall (its own load's wait for another load,
 * other adapters' loads while it queued: bench/des/class-misses.ts `parts`) to the class of the
 * request behind each load.
 *
 * `node dist/bench/des/batch-loads.js LOAD_MS LOAD SEED TRACE` (after `npm run build`).
 */
import { CLASS_POLICY } from '../goals';
import { TWO_CLASSES } from '../workloads';
import { classMisses, type LoadSpan, type Timeline } from './class-misses';
import * as P from './policies';
import { conversationClassPointFromArgs } from './slo-classes';

const overlap = (a0: number, a1: number, b0: number, b1: number) =>
  Math.max(0, Math.min(a1, b1) - Math.max(a0, b0));

/** The request behind each load: the latest of its adapter that arrived by then and went there. */
export function loadOwners(
  loads: readonly LoadSpan[],
  timelines: readonly (Timeline | undefined)[],
  adapters: readonly string[],
): (number | undefined)[] {
  return loads.map((l) => {
    let best: number | undefined;
    timelines.forEach((t, i) => {
      if (!t || t.url !== l.url || adapters[i] !== l.adapter || t.at > l.asked || t.routed < l.asked) return;
      if (best === undefined || t.at > timelines[best]!.at) best = i;
    });
    return best;
  });
}

async function main(): Promise<void> {
  const { s, load, arrivals, adapters, classes } = conversationClassPointFromArgs(process.argv.slice(2));
  const policy = P.loraRouter(CLASS_POLICY, {
    slo_classes: TWO_CLASSES.classes,
    default_slo_class: 'interactive',
  });
  const loads: LoadSpan[] = [];
  const { timelines, causes } = await classMisses(policy, s, arrivals, adapters, classes, loads);
  const owners = loadOwners(loads, timelines, adapters);
  const byClass = (i: number | undefined) => (i === undefined ? 'unknown' : classes[i]!);
  const count: Record<string, number> = {};
  owners.forEach((o) => (count[byClass(o)] = (count[byClass(o)] ?? 0) + 1));
  const requests: Record<string, number> = {};
  classes.forEach((c) => (requests[c] = (requests[c] ?? 0) + 1));
  // Late interactive requests: engine time stopped by loads, by the class that asked for each.
  const stallMs: Record<string, number> = {};
  let late = 0;
  let stalledByBatch = 0;
  timelines.forEach((t, i) => {
    if (!t || classes[i] !== 'interactive' || causes[i] === undefined) return;
    late++;
    let byBatch = 0;
    loads.forEach((l, k) => {
      if (l.url !== t.url || l.adapter === adapters[i]) return;
      const ms = overlap(t.at, t.start, l.start, l.end);
      if (ms <= 0) return;
      const c = byClass(owners[k]);
      stallMs[c] = (stallMs[c] ?? 0) + ms;
      if (c === 'batch') byBatch += ms;
    });
    if (byBatch > 0) stalledByBatch++;
  });
  console.log(
    JSON.stringify({
      loadMs: s.loadMs,
      load,
      seed: s.seed,
      requests,
      loadsByClass: count,
      lateInteractive: late,
      lateStalledByABatchLoad: stalledByBatch,
      lateStallMsByClass: stallMs,
    }),
  );
}

if (require.main === module) void main();
