/**
 * Issue 34's batch diagnosis: the batch requests the router sheds (503 `shed_low_priority`), the
 * prediction each was shed on (src/router/room-wait.ts `holdsNow`: its wait so far plus the
 * predicted TTFT, less the wait for an idle adapter) split into its parts (src/work/predict.ts),
 * against what the same request got when nothing was shed (the same run with the shedding off:
 * it is held or sent instead) and when every request was treated alike (one class).
 *
 * `node dist/bench/des/shed-diagnosis.js LOAD_MS LOAD SEED TRACE` (after `npm run build`). Runs
 * the point four times (classes; without shedding, held or sent at the moment it would be shed;
 * one class): about 7 s.
 * It patches the compiled modules' exports (predictTtft, RoomWait's holdsNow) to see inside a
 * decision; nothing in src/ knows.
 */
import { percentile as pct } from '../../sim/workload/percentile';
import { RoomWait } from '../../src/router/room-wait';
import * as predict from '../../src/work/predict';
import { endAt, type ReplicaState } from '../../src/work/replica-state';
import type { WorkModel } from '../../src/work/work-model';
import { CLASS_POLICY, CLASS_VARIANT_ONE } from '../goals';
import { TWO_CLASSES } from '../workloads';
import * as P from './policies';
import { conversationClassPointFromArgs } from './slo-classes';
import { runPolicy } from './run';

/** A candidate's predicted TTFT in parts (predictTtft: load + stall + max(kv, ahead) + own). */
interface PredictedParts {
  url: string;
  loadMs: number;
  fixedMs: number;
  stallMs: number;
  kvMs: number;
  /** Of `kvMs` (the larger of the two): the wait for KV room, and for a running slot (src/work/waits.ts). */
  kvRoomMs: number;
  slotMs: number;
  /** `slotMs` with the requests there taken in the order they are predicted to end, not admitted. */
  slotSortedMs: number;
  aheadMs: number;
  ownMs: number;
  totalMs: number;
}

/** One would-be shed: when, the prediction, and its parts. */
interface Shed {
  waitedMs: number;
  ttftMs: number;
  roomMs: number;
  expectedMs: number;
  parts: PredictedParts;
}

const partsKey = Symbol('predictedParts');

/** Each candidate carries the parts of its last prediction. */
function recordParts(): void {
  const original = predict.predictTtft;
  (predict as { predictTtft: typeof original }).predictTtft = (c, req, now, work, loads, roomNow, out) => {
    const p = original(c, req, now, work, loads, roomNow, out);
    const w = (work as WorkModel).outlook(c.url, now, req.promptTokens + req.maxTokens);
    (c as unknown as Record<symbol, PredictedParts>)[partsKey] = {
      url: c.url,
      loadMs: p.loadMs,
      fixedMs: p.fixedMs,
      stallMs: c.holder ? 0 : w.stallMs,
      kvMs: w.waitMs,
      kvRoomMs: (work as WorkModel).kvWaitMs(c.url, now, req.promptTokens + req.maxTokens),
      slotMs: (work as WorkModel).slotWaitMs(c.url, now),
      slotSortedMs: slotWaitSorted(work as WorkModel, c.url, now),
      aheadMs: p.aheadMs,
      ownMs: p.ownMs,
      totalMs: p.totalMs,
    };
    return p;
  };
}

/** waits.ts `slotWait` with the k-th request to end by predicted end, not by admission. */
function slotWaitSorted(work: WorkModel, url: string, now: number): number {
  const w = work as unknown as {
    replicas: Map<string, ReplicaState>;
    meanMaxTokens: { value: number };
    decodeMs: { value: number };
  };
  const r = w.replicas.get(url);
  if (!r || r.scrapedWaiting <= 0) return 0;
  let k = Math.max(1, r.scrapedWaiting + r.sinceScrape + 1);
  const ends = [...r.entries.values()]
    .map((e) => Math.max(now, endAt(r, e, now, w.decodeMs.value)))
    .sort((a, b) => a - b);
  if (k <= ends.length) return ends[k - 1]! - now;
  k -= ends.length;
  const perRequest = (w.meanMaxTokens.value * w.decodeMs.value) / Math.max(1, r.scrapedRunning);
  return (ends.at(-1) ?? now) + k * perRequest - now;
}

type HoldsNow = (now: number, decided: Record<string | symbol, unknown>) => boolean;

/**
 * Records each sheddable request's first would-be shed (by its arrival time). `shedding`: `on`,
 * as the router does; `hold`, the request is then no longer sheddable (held or sent as a class
 * behind a higher one); `send`, it is sent then, to the replica it was predicted on.
 */
type Shedding = 'on' | 'hold' | 'send';
function recordSheds(sheds: Map<number, Shed>, shedding: Shedding): void {
  const proto = RoomWait.prototype as unknown as { holdsNow: HoldsNow };
  const original = proto.holdsNow;
  proto.holdsNow = function (this: Record<string, unknown>, now, decided) {
    if (this.sheddable === true && (this.gateMs as number) > 0) {
      const ttftMs = decided.ttftMs as number;
      const fixedMs = decided.fixedMs as number;
      const own = fixedMs + (decided.ownMs as number);
      const gate = this.gateMs as number;
      const busy = own < gate ? ttftMs > gate : ttftMs - own > gate;
      const roomMs = ((decided.loadMs as number | undefined) ?? fixedMs) - fixedMs;
      const waitedMs = now - (this.started as number);
      const expectedMs = waitedMs + ttftMs - roomMs;
      if (busy && expectedMs > (this.objectiveMs as number)) {
        const parts = decided[partsKey] as PredictedParts;
        if (!sheds.has(this.started as number))
          sheds.set(this.started as number, { waitedMs, ttftMs, roomMs, expectedMs, parts: { ...parts } });
        if (shedding !== 'on') this.sheddable = false;
        if (shedding === 'send') return false;
      }
    }
    return original.call(this, now, decided);
  };
}

interface Served {
  url: string;
  predictedMs?: number;
  routed: number;
  start: number;
  first: number;
}

async function main(): Promise<void> {
  const { s, load, arrivals, adapters, classes } = conversationClassPointFromArgs(process.argv.slice(2));
  recordParts();
  const proto = RoomWait.prototype as unknown as { holdsNow: HoldsNow };
  const holdsNow = proto.holdsNow;
  const classConfig = { slo_classes: TWO_CLASSES.classes, default_slo_class: 'interactive' };
  const run = async (name: string, config: Record<string, unknown>, shedding: Shedding) => {
    const sheds = new Map<number, Shed>();
    const served = new Array<Served | undefined>(arrivals.length);
    proto.holdsNow = holdsNow;
    recordSheds(sheds, shedding);
    const r = await runPolicy(P.loraRouter(name, config), s, arrivals, adapters, {
      classes,
      served: (url, predictedMs, _t, rec, i) =>
        (served[i] = { url, predictedMs, routed: rec.arrival, start: rec.start!, first: rec.firstToken! }),
    });
    proto.holdsNow = holdsNow;
    return { ttft: r.ttftOf!, sheds, served };
  };
  const withShed = await run(CLASS_POLICY, classConfig, 'on');
  const held = await run(`${CLASS_POLICY}, held not shed`, classConfig, 'hold');
  const sent = await run(`${CLASS_POLICY}, sent not shed`, classConfig, 'send');
  const one = await run(CLASS_VARIANT_ONE, {}, 'on');
  const index = new Map(arrivals.map((a, i) => [a.at, i]));
  const within = (xs: number[], c: string, ms: number) => {
    const ys = xs.filter((_, i) => classes[i] === c);
    return +((100 * ys.filter((x) => x <= ms).length) / ys.length).toFixed(1);
  };
  // The refused batch requests (the classes' run), each with the prediction it was shed on.
  const shed = [...withShed.sheds]
    .map(([at, x]) => ({ i: index.get(at)!, ...x }))
    .filter((x) => x.i !== undefined && withShed.ttft[x.i] === Infinity);
  const mean = (xs: number[]) => Math.round(xs.reduce((n, x) => n + x, 0) / Math.max(1, xs.length));
  const got = (xs: number[]) => {
    const ys = shed.map((x) => xs[x.i]!);
    return {
      within30s: ys.filter((t) => t <= 30000).length,
      p50: Math.round(pct(ys, 0.5)),
      p90: Math.round(pct(ys, 0.9)),
    };
  };
  // Sent at the moment it would have been shed, to the replica it was predicted on: predicted
  // there against what it got there (ms from being sent).
  const there = shed.map((x) => ({ x, v: sent.served[x.i] })).filter((y) => y.v?.url === y.x.parts.url);
  const x = shed;
  console.log(
    JSON.stringify({
      loadMs: s.loadMs,
      load,
      seed: s.seed,
      batchWithin30s: {
        classes: within(withShed.ttft, 'batch', 30000),
        heldNotShed: within(held.ttft, 'batch', 30000),
        sentNotShed: within(sent.ttft, 'batch', 30000),
        oneClass: within(one.ttft, 'batch', 30000),
      },
      interactiveWithin2s: {
        classes: within(withShed.ttft, 'interactive', 2000),
        heldNotShed: within(held.ttft, 'interactive', 2000),
        sentNotShed: within(sent.ttft, 'interactive', 2000),
        oneClass: within(one.ttft, 'interactive', 2000),
      },
      shed: shed.length,
      // Means over the shed requests (ms): the prediction each was shed on and its parts.
      meanAtShed: {
        waited: mean(x.map((y) => y.waitedMs)),
        ttft: mean(x.map((y) => y.ttftMs)),
        room: mean(x.map((y) => y.roomMs)),
        expected: mean(x.map((y) => y.expectedMs)),
        load: mean(x.map((y) => y.parts.loadMs)),
        stall: mean(x.map((y) => y.parts.stallMs)),
        kv: mean(x.map((y) => y.parts.kvMs)),
        kvRoom: mean(x.map((y) => y.parts.kvRoomMs)),
        slot: mean(x.map((y) => y.parts.slotMs)),
        slotSorted: mean(x.map((y) => y.parts.slotSortedMs)),
        ahead: mean(x.map((y) => y.parts.aheadMs)),
        own: mean(x.map((y) => y.parts.ownMs)),
      },
      kvOverAhead: x.filter((y) => y.parts.kvMs > y.parts.aheadMs).length,
      shedAtArrival: x.filter((y) => y.waitedMs === 0).length,
      // What the same requests got (TTFT from arrival; refused: Infinity).
      heldNotShed: got(held.ttft),
      sentNotShed: got(sent.ttft),
      oneClass: got(one.ttft),
      sentThere: {
        n: there.length,
        predicted: mean(there.map((y) => y.x.ttftMs)),
        got: mean(there.map((y) => y.v!.first - y.v!.routed)),
        queued: mean(there.map((y) => y.v!.start - y.v!.routed)),
        predictedKv: mean(there.map((y) => y.x.parts.kvMs)),
        predictedSlotSorted: mean(there.map((y) => y.x.parts.slotSortedMs)),
      },
      perRequest: process.env.SHED_DETAIL
        ? x.map((y) => ({
            i: y.i,
            waited: Math.round(y.waitedMs),
            ttft: Math.round(y.ttftMs),
            kvRoom: Math.round(y.parts.kvRoomMs),
            slot: Math.round(y.parts.slotMs),
            ahead: Math.round(y.parts.aheadMs),
            load: Math.round(y.parts.loadMs),
            gotThere:
              sent.served[y.i]?.url === y.parts.url
                ? Math.round(sent.served[y.i]!.first - sent.served[y.i]!.routed)
                : undefined,
            held: Math.round(held.ttft[y.i]!),
            one: Math.round(one.ttft[y.i]!),
          }))
        : undefined,
    }),
  );
}

if (require.main === module) void main();
