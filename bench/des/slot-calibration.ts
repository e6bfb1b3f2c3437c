/**
 * Issue 34's slot-wait calibration: for every request the router sends to a replica whose last
 * scrape reported a queue (src/work/waits.ts `slotWait` > 0), the wait for a running slot it
 * predicted there against the wait the request got (the engine's `start` less its arrival at
 * the replica), under candidate formulas computed on the same state at the same moment. The
 * routing follows the build's own `slotWait`; the others are only read.
 *
 * `node dist/bench/des/slot-calibration.js LOAD_MS LOAD SEED TRACE` (after `npm run build`):
 * the conversation class point (as shed-diagnosis.ts), about 3 s. Prints per formula the median
 * and p90 of predicted / got, and the mean of each; then why they are off: each request there
 * at a decision, its predicted end (replica-state.ts `endAt`) against its end. Only the replica
 * chosen is measured (its actual wait is known): predictions there lean low, since the router
 * picks the lowest (a shed request's lean high: shed-diagnosis.ts).
 */
import { percentile as pct } from '../../sim/workload/percentile';
import { advance, endAt, type Entry, type ReplicaState } from '../../src/work/replica-state';
import { slotWait } from '../../src/work/waits';
import { WorkModel, type Admission } from '../../src/work/work-model';
import { CLASS_POLICY } from '../goals';
import { TWO_CLASSES } from '../workloads';
import * as P from './policies';
import { conversationClassPointFromArgs } from './slo-classes';
import { runPolicy } from './run';

type Formula = (r: ReplicaState, now: number, meanMaxTokens: number, decodeMs: number) => number;

/** The k-th request there to end by predicted end (a sort: fine for a measure, not per decision). */
const sorted: Formula = (r, now, meanMaxTokens, decodeMs) => {
  advance(r, now);
  let k = Math.max(1, r.scrapedWaiting + r.sinceScrape + 1);
  const ends = [...r.entries.values()]
    .map((e) => Math.max(now, endAt(r, e, now, decodeMs)))
    .sort((a, b) => a - b);
  if (k <= ends.length) return ends[k - 1]! - now;
  k -= ends.length;
  const perRequest = (meanMaxTokens * decodeMs) / Math.max(1, r.scrapedRunning);
  return (ends.at(-1) ?? now) + k * perRequest - now;
};

/** The formula before issue 34: the k-th request there in admission order. */
const admissionOrder: Formula = (r, now, meanMaxTokens, decodeMs) => {
  if (r.scrapedWaiting <= 0) return 0;
  advance(r, now);
  let k = Math.max(1, r.scrapedWaiting + r.sinceScrape + 1);
  let end = now;
  for (const e of r.entries.values()) {
    end = Math.max(now, endAt(r, e, now, decodeMs));
    if (--k === 0) return end - now;
  }
  const perRequest = (meanMaxTokens * decodeMs) / Math.max(1, r.scrapedRunning);
  return end + k * perRequest - now;
};

/**
 * vLLM's FIFO over the slots, as waits.ts `slotWait` now takes it (a sort and splices here: a
 * reference for it, not per decision), with a request there past its predicted end taken to end
 * `overdue` of its decode later: 0.1 is the build's `OVERDUE_SHARE` (the same figure as `slotWait`
 * in a build that has it, a check of its heap).
 */
function overdueFifo(overdue: number): Formula {
  return (r, now, meanMaxTokens, decodeMs) => {
    if (r.scrapedWaiting <= 0) return 0;
    advance(r, now);
    const slots = Math.max(1, r.scrapedRunning);
    const heap: number[] = [];
    const waiting: number[] = [];
    for (const e of r.entries.values()) {
      if (heap.length < slots) {
        const end = endAt(r, e, now, decodeMs);
        heap.push(end > now ? end : now + overdue * e.maxTokens * decodeMs);
      } else waiting.push((e.prompt / r.rate.value) * 1000 + e.maxTokens * decodeMs);
    }
    const typical = meanMaxTokens * decodeMs;
    const known = waiting.length;
    while (heap.length < slots) heap.push(now + typical / 2);
    for (let m = r.scrapedWaiting + r.sinceScrape - known; m > 0; m--) waiting.push(typical);
    heap.sort((a, b) => a - b);
    for (const service of waiting) {
      const at = heap.shift()! + service;
      let j = 0;
      while (j < heap.length && heap[j]! < at) j++;
      heap.splice(j, 0, at);
    }
    return heap[0]! - now;
  };
}

const FORMULAS: Record<string, Formula> = {
  admissionOrder,
  sorted,
  /** This build's (src/work/waits.ts). */
  slotWait,
  fifoOverdue0: overdueFifo(0),
  fifoOverdue10: overdueFifo(0.1),
  fifoOverdue25: overdueFifo(0.25),
};

interface Sample {
  predicted: Record<string, number>;
  got?: number;
  at: number;
  /** The requests there at the decision, each with its predicted end. */
  there: { e: Entry; end: number }[];
  decodeMs: number;
}
/** What each request of ours got, by its entry. */
const recs = new Map<Entry, { start: number; first: number; end: number; out: number }>();

async function main(): Promise<void> {
  const { s, load, arrivals, adapters, classes } = conversationClassPointFromArgs(process.argv.slice(2));
  // At each admission, before it changes the replica's state: every formula there, now.
  const pending = new Map<string, Sample[]>();
  const entryOf = new Map<string, Entry[]>();
  const samples: Sample[] = [];
  const proto = WorkModel.prototype as unknown as { admit: (a: Admission) => void };
  const admit = proto.admit;
  proto.admit = function (this: WorkModel, a: Admission) {
    const w = this as unknown as {
      replicas: Map<string, ReplicaState>;
      meanMaxTokens: { value: number };
      decodeMs: { value: number };
    };
    const r = w.replicas.get(a.url);
    if (r && r.scrapedWaiting > 0) {
      const predicted: Record<string, number> = {};
      for (const [name, f] of Object.entries(FORMULAS))
        predicted[name] = f(r, a.at, w.meanMaxTokens.value, w.decodeMs.value);
      const there = [...r.entries.values()].map((e) => ({ e, end: endAt(r, e, a.at, w.decodeMs.value) }));
      const x: Sample = { predicted, at: a.at, there, decodeMs: w.decodeMs.value };
      const key = `${a.url} ${a.at} ${a.maxTokens}`;
      pending.set(key, [...(pending.get(key) ?? []), x]);
      samples.push(x);
    }
    admit.call(this, a);
    const r2 = (this as unknown as { replicas: Map<string, ReplicaState> }).replicas.get(a.url)!;
    const e = [...r2.entries.values()].at(-1)!;
    const key = `${a.url} ${a.at} ${a.maxTokens}`;
    entryOf.set(key, [...(entryOf.get(key) ?? []), e]);
  };
  const config = { slo_classes: TWO_CLASSES.classes, default_slo_class: 'interactive' };
  await runPolicy(P.loraRouter(CLASS_POLICY, config), s, arrivals, adapters, {
    classes,
    served: (url, _p, _t, rec) => {
      const x = pending.get(`${url} ${rec.arrival} ${rec.outputTokens}`)?.shift();
      if (x) x.got = rec.start! - rec.arrival;
      const e = entryOf.get(`${url} ${rec.arrival} ${rec.outputTokens}`)?.shift();
      if (e)
        recs.set(e, { start: rec.start!, first: rec.firstToken!, end: rec.end!, out: rec.outputTokens ?? 0 });
    },
  });
  proto.admit = admit;
  const got = samples.filter((x) => x.got !== undefined);
  const out: Record<string, unknown> = {
    loadMs: s.loadMs,
    load,
    seed: s.seed,
    decisions: samples.length,
    matched: got.length,
    meanGot: Math.round(got.reduce((n, x) => n + x.got!, 0) / Math.max(1, got.length)),
  };
  // The ratio over waits of at least one engine step (a zero wait makes any ratio infinite).
  const long = got.filter((x) => x.got! >= 100);
  for (const name of Object.keys(FORMULAS)) {
    const ratios = long.map((x) => x.predicted[name]! / x.got!);
    out[name] = {
      mean: Math.round(got.reduce((n, x) => n + x.predicted[name]!, 0) / Math.max(1, got.length)),
      ratioP50: +pct(ratios, 0.5).toFixed(2),
      ratioP90: +pct(ratios, 0.9).toFixed(2),
      ratioP10: +pct(ratios, 0.1).toFixed(2),
      // Mean absolute error (ms) over every matched decision.
      mae: Math.round(
        got.reduce((n, x) => n + Math.abs(x.predicted[name]! - x.got!), 0) / Math.max(1, got.length),
      ),
    };
  }
  out.ratioOver = long.length;
  // Why: each request there at a decision, its predicted end against its end, split by whether
  // it was running then (started) or waiting for a slot.
  const err = { running: [] as number[], waiting: [] as number[] };
  const perToken: number[] = [];
  const learned: number[] = [];
  for (const x of got) {
    learned.push(x.decodeMs);
    for (const { e, end } of x.there) {
      const g = recs.get(e);
      if (!g) continue;
      (g.start <= x.at ? err.running : err.waiting).push(end - g.end);
    }
  }
  const tokErr: number[] = [];
  const prefillErr: number[] = [];
  for (const [e, g] of recs) {
    tokErr.push(e.maxTokens - g.out);
    prefillErr.push(e.prefillEndAt - g.first);
  }
  out.maxTokensLessOut = q(tokErr);
  out.prefillEndAtLessFirst = q(prefillErr);
  for (const g of recs.values()) if (g.out > 1) perToken.push((g.end - g.first) / (g.out - 1));
  function q(xs: number[]) {
    return {
      n: xs.length,
      p10: Math.round(pct(xs, 0.1)),
      p50: Math.round(pct(xs, 0.5)),
      p90: Math.round(pct(xs, 0.9)),
    };
  }
  out.endErrorMs = { running: q(err.running), waiting: q(err.waiting) };
  out.decodeMsPerToken = {
    learnedP50: +pct(learned, 0.5).toFixed(1),
    gotP50: +pct(perToken, 0.5).toFixed(1),
    gotP90: +pct(perToken, 0.9).toFixed(1),
  };
  console.log(JSON.stringify(out, null, 1));
}

if (require.main === module) void main();
