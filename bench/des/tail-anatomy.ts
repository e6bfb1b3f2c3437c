/**
 * Where lora-router's slowest 1% of requests spend their time (issue 34's TTFT p99 goal), beside
 * one baseline's p99 on the same requests. Each tail request's TTFT is split as
 * bench/des/class-misses.ts splits a late one, and the decision is shown against the fleet as it
 * stood when the request was sent: the chosen replica's queue (waiting requests and their prompt
 * tokens, KV reserved) against the emptiest other replica's, and whether it held the adapter.
 *
 * The slo part's points (8 replicas x 8 slots, 200 adapters, Zipf 1, 1,000 requests):
 *
 *   node dist/bench/des/tail-anatomy.js WORKLOAD LOAD_MS LOAD SEEDS [BASELINE [TRACE]]
 *   e.g. node dist/bench/des/tail-anatomy.js long 100 0.7 1,2,3 'least outstanding tokens'
 *
 * It also shows, per tail request, what the router's work model read of the chosen replica when
 * it decided (patched in: a tool's view, not the router's API), and the requests admitted there
 * from the decision until it was sent.
 */
import type { VirtualClock } from '../../src/clock';
import type { Arrival } from '../../sim/workload/workload';
import { BASELINE_POLICIES } from '../goals';
import { parts, recordTimelines, TTFT_PARTS, traced, type LoadSpan, type Timeline } from './class-misses';
import type { DesFleet } from './fleet';
import * as P from './policies';
import { adapterSequence, runPolicy } from './run';
import { sloPoint } from './slo-point';
import { WorkModel } from '../../src/work/work-model';
import * as Predict from '../../src/work/predict';

/** Each prediction the router made, by replica: what its work model read then. */
type Seen = {
  now: number;
  totalMs: number;
  waitMs: number;
  rate: number;
  queuedTokens: number;
  kv: number;
  inFlight: number;
};
const seenBy = new Map<string, Seen[]>();
let lastOutlook:
  | { waitMs: number; rate: number; queuedTokens: number; kv: number; inFlight: number }
  | undefined;
const outlook = WorkModel.prototype.outlook;
WorkModel.prototype.outlook = function (this: WorkModel, url: string, now: number, need: number) {
  const o = outlook.call(this, url, now, need);
  const v = this.view(url, now);
  lastOutlook = {
    waitMs: o.waitMs,
    rate: o.rate,
    queuedTokens: o.queuedTokens,
    kv: v.kvReservedTokens,
    inFlight: v.inFlight,
  };
  return o;
};
/** Each admission to the work model, by replica: when, and its prompt. */
const admitsBy = new Map<string, { at: number; prompt: number }[]>();
const admit = WorkModel.prototype.admit;
WorkModel.prototype.admit = function (this: WorkModel, a) {
  const list = admitsBy.get(a.url) ?? [];
  admitsBy.set(a.url, list);
  list.push({ at: a.at, prompt: a.promptTokens });
  return admit.call(this, a);
};
const predictTtft = Predict.predictTtft;
(Predict as { predictTtft: typeof predictTtft }).predictTtft = (...args) => {
  const p = predictTtft(...args);
  const list = seenBy.get(args[0].url) ?? [];
  seenBy.set(args[0].url, list);
  if (list.length > 20_000) list.splice(0, 10_000);
  list.push({ now: args[2], totalMs: p.totalMs, ...lastOutlook! });
  return p;
};

/** One replica's queue as the engine holds it. */
interface QueueAt {
  running: number;
  waiting: number;
  waitingPrompt: number;
  kvReserved: number;
  holds: boolean;
}

const queueOf = (fleet: DesFleet, i: number, adapter: string): QueueAt => {
  const q = fleet.engines[i]!.queueView();
  return {
    running: q.running.length,
    waiting: q.waiting.length,
    waitingPrompt: q.waiting.reduce((n, w) => n + w.prompt, 0),
    kvReserved: q.kvReserved,
    holds: fleet.registeredOn(i).includes(adapter),
  };
};

/** `p` with each request's replica queues recorded when the router sent it. */
type Sent = { at: number; chosen: QueueAt; others: QueueAt[]; seen?: Seen };
function withQueues(p: P.Policy, sent: Map<Arrival, Sent>): P.Policy {
  return {
    ...p,
    create(clock: VirtualClock, fleet: DesFleet, seed: number, slots: number) {
      const router = p.create(clock, fleet, seed, slots);
      return {
        ...router,
        route: async (req) => {
          const r = await router.route(req);
          if (!('error' in r)) {
            const at = fleet.urls.indexOf(r.url);
            sent.set(req.arrival, {
              at: clock.now(),
              chosen: queueOf(fleet, at, req.adapter),
              ...(r.predictedMs === undefined
                ? {}
                : {
                    seen: [...(seenBy.get(r.url) ?? [])]
                      .reverse()
                      .find((o: Seen) => o.totalMs === r.predictedMs),
                  }),
              others: fleet.urls.map((_, i) => queueOf(fleet, i, req.adapter)).filter((_, i) => i !== at),
            });
          }
          return r;
        },
      };
    },
  };
}

const p99 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.ceil(0.99 * xs.length) - 1]!;
const s1 = (ms: number) => `${(ms / 1000).toFixed(2)}`;

async function main() {
  const [workload = 'long', loadMs = '100', load = '0.7', seeds = '1', baseline = '', trace] =
    process.argv.slice(2);
  const { scenario, arrivals } = sloPoint(workload, Number(load), trace);
  const other = BASELINE_POLICIES.find((b) => b.name === baseline);
  for (const seed of seeds.split(',').map(Number)) {
    const s = { ...scenario, seed, loadMs: Number(loadMs) };
    const adapters = adapterSequence(arrivals.length, s);
    const started = Date.now();
    const loads: LoadSpan[] = [];
    const held = new Map<Arrival, boolean>();
    const sent = new Map<Arrival, Sent>();
    const timelines: (Timeline | undefined)[] = [];
    const router = withQueues(traced(P.loraRouter('lora-router', {}), loads, held), sent);
    const mine = await runPolicy(router, s, arrivals, adapters, {
      served: recordTimelines(timelines, arrivals),
    });
    const theirs = other ? await runPolicy(other, s, arrivals, adapters) : undefined;
    console.log(
      `${workload} ${loadMs} ms ${Number(load) * 100}% seed ${seed}: lora-router p99 ${s1(mine.ttftP99)} s SLO ${(mine.sloAttainment * 100).toFixed(1)}% refused ${mine.errors} loads ${mine.loads} p50 ${s1(mine.ttftP50)} s` +
        (theirs
          ? ` | ${theirs.policy} p99 ${s1(theirs.ttftP99)} s SLO ${(theirs.sloAttainment * 100).toFixed(1)}%`
          : '') +
        ` (${((Date.now() - started) / 1000).toFixed(0)} s)`,
    );
    const ttft = timelines.map((t) => (t ? t.first - t.at : Infinity));
    const cut = p99(ttft);
    const tail = ttft.map((t, i) => [t, i] as const).filter(([t]) => t >= cut);
    const sum = Object.fromEntries(TTFT_PARTS.map((k) => [k, 0])) as Record<
      (typeof TTFT_PARTS)[number],
      number
    >;
    for (const [t, i] of tail.sort((a, b) => b[0] - a[0])) {
      const tl = timelines[i]!;
      const pt = parts(tl, adapters[i]!, loads);
      for (const k of TTFT_PARTS) sum[k] += pt[k];
      const q = sent.get(arrivals[i]!)!;
      const emptiest = q.others.reduce((a, b) => (b.waitingPrompt < a.waitingPrompt ? b : a));
      const idle = q.others.filter((o) => o.running === 0 && o.waiting === 0).length;
      console.log(
        `  #${i} ttft ${s1(t)} predicted ${tl.predictedMs === undefined ? '-' : s1(tl.predictedMs)} prompt ${arrivals[i]!.promptTokens} ` +
          `held-anywhere ${held.get(arrivals[i]!) ? 'y' : 'n'} | ` +
          TTFT_PARTS.map((k) => `${k} ${s1(pt[k])}`).join(' ') +
          ` | chosen ${q.chosen.holds ? 'holder' : 'non-holder'} run ${q.chosen.running} wait ${q.chosen.waiting} (${q.chosen.waitingPrompt} tok) kv ${q.chosen.kvReserved}` +
          (q.seen
            ? ` | router saw at -${s1(q.at - q.seen.now)} s: in flight ${q.seen.inFlight} wait ${s1(q.seen.waitMs)} queued ${Math.round(q.seen.queuedTokens)} tok at ${Math.round(q.seen.rate)}/s kv ${q.seen.kv}`
            : '') +
          (q.seen
            ? ` | admitted there since the decision: ${(admitsBy.get(timelines[i]!.url) ?? [])
                .filter((x) => x.at >= q.seen!.now && x.at <= q.at)
                .map((x) => `${s1(x.at - q.seen!.now)}:${x.prompt}`)
                .join(',')}`
            : '') +
          ` | emptiest other run ${emptiest.running} wait ${emptiest.waiting} (${emptiest.waitingPrompt} tok) kv ${emptiest.kvReserved}${emptiest.holds ? ' holder' : ''}, idle others ${idle}`,
      );
    }
    console.log(`  tail total (s): ${TTFT_PARTS.map((k) => `${k} ${s1(sum[k])}`).join(' ')}`);
  }
}

void main();
