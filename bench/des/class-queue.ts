/**
 * Issue 34's diagnosis: of the interactive requests late because of the replica's queue (the
 * cause bench/des/class-misses.ts gives), which requests they queued behind. Per late request,
 * on its replica when it got there: requests waiting ahead of it (sent earlier, admitted after it
 * was sent) and requests running (holding the slots it waited for), each by class.
 *
 * `node dist/bench/des/class-queue.js LOAD_MS LOAD SEED TRACE [priority|fcfs [CONFIG_JSON]]` (after `npm run build`;
 * `priority`: every engine runs vLLM's priority scheduling and the router sets each request's
 * priority from its class, `vllm_scheduling_policy: priority`; `fcfs` or nothing: first come,
 * first served). CONFIG_JSON, after it: more of the router's configuration (a lever on trial).
 */
import { defaultEngineOptions } from '../../sim/engine/engine';
import { CLASS_POLICY } from '../goals';
import { TWO_CLASSES } from '../workloads';
import { classMisses, type MissCause, type Timeline } from './class-misses';
import * as P from './policies';
import { conversationClassPoint } from './slo-classes';

/** Counts over the interactive requests late because of the replica's queue (class-misses.ts's cause). */
export interface QueueDiagnosis {
  late: number;
  lateByQueue: number;
  /** Of `lateByQueue`: at least one batch request waiting ahead of it. */
  batchWaitingAhead: number;
  /** Of `lateByQueue`: only interactive requests waiting ahead of it. */
  onlyInteractiveAhead: number;
  /** Of `lateByQueue`: nothing waiting ahead; it waited for a slot or KV room alone. */
  nothingAhead: number;
  /** Of `lateByQueue`: at least one batch request running when it got there. */
  batchRunning: number;
  /** Summed over `lateByQueue`: requests waiting ahead, and running, by class. */
  ahead: { batch: number; interactive: number };
  running: { batch: number; interactive: number };
  /** Summed over `lateByQueue`: ms queued in the replica. */
  queuedMs: number;
  /** Of `lateByQueue`: predicted by the router to answer within the objective where it went. */
  predictedInTime: number;
  /** Summed over `lateByQueue`: the router's predicted TTFT there, and the TTFT from being sent there (ms). */
  predictedMs: number;
  sentToFirstMs: number;
  /** Of `lateByQueue`: its adapter not in the running batch, which already mixed `max_loras` adapters (vLLM skips it). */
  loraFull: number;
  /** Of `lateByQueue`: the running batch had every slot (`max_num_seqs`) taken. */
  slotsFull: number;
}

export function diagnose(
  timelines: (Timeline | undefined)[],
  causes: (MissCause | undefined)[],
  classes: readonly string[],
  objectiveMs: number,
  adapters: readonly string[],
  engine: { maxLoras: number; maxNumSeqs: number },
): QueueDiagnosis {
  const d: QueueDiagnosis = {
    late: 0,
    lateByQueue: 0,
    batchWaitingAhead: 0,
    onlyInteractiveAhead: 0,
    nothingAhead: 0,
    batchRunning: 0,
    ahead: { batch: 0, interactive: 0 },
    running: { batch: 0, interactive: 0 },
    queuedMs: 0,
    predictedInTime: 0,
    predictedMs: 0,
    sentToFirstMs: 0,
    loraFull: 0,
    slotsFull: 0,
  };
  timelines.forEach((s, i) => {
    if (!s || classes[i] !== 'interactive' || causes[i] === undefined) return;
    d.late++;
    if (causes[i] !== 'queue') return;
    d.lateByQueue++;
    d.queuedMs += s.start - s.routed;
    d.predictedMs += s.predictedMs ?? 0;
    d.sentToFirstMs += s.first - s.routed;
    if ((s.predictedMs ?? Infinity) <= objectiveMs) d.predictedInTime++;
    const t = s.routed;
    const ahead = { batch: 0, interactive: 0 };
    const running = { batch: 0, interactive: 0 };
    const mixed = new Set<string>();
    timelines.forEach((u, j) => {
      if (!u || j === i || u.url !== s.url) return;
      const c = classes[j] === 'batch' ? 'batch' : 'interactive';
      if (u.routed <= t && u.start > t) ahead[c]++;
      else if (u.start <= t && u.end > t) {
        running[c]++;
        mixed.add(adapters[j]!);
      }
    });
    if (!mixed.has(adapters[i]!) && mixed.size >= engine.maxLoras) d.loraFull++;
    if (running.batch + running.interactive >= engine.maxNumSeqs) d.slotsFull++;
    if (ahead.batch > 0) d.batchWaitingAhead++;
    else if (ahead.interactive > 0) d.onlyInteractiveAhead++;
    else d.nothingAhead++;
    if (running.batch > 0) d.batchRunning++;
    d.ahead.batch += ahead.batch;
    d.ahead.interactive += ahead.interactive;
    d.running.batch += running.batch;
    d.running.interactive += running.interactive;
  });
  return d;
}

async function main(): Promise<void> {
  const [loadMs, load, seed, trace, sched, config = '{}'] = process.argv.slice(2);
  const priority = sched === 'priority';
  const { s, arrivals, adapters, classes } = conversationClassPoint(
    Number(loadMs),
    Number(load),
    Number(seed),
    trace,
    // vLLM's priority scheduling in every engine, and the router told so.
    priority ? { schedulingPolicy: 'priority' } : {},
  );
  const policy = P.loraRouter(CLASS_POLICY, {
    slo_classes: TWO_CLASSES.classes,
    default_slo_class: 'interactive',
    ...(priority ? { vllm_scheduling_policy: 'priority' } : {}),
    ...(JSON.parse(config) as Record<string, unknown>),
  });
  const t0 = Date.now();
  const { result: r, misses, timelines, causes } = await classMisses(policy, s, arrivals, adapters, classes);
  const within = (c: string, ms: number) => {
    const xs = r.ttftOf!.filter((_, i) => classes[i] === c);
    return `${((100 * xs.filter((x) => x <= ms).length) / xs.length).toFixed(1)}% (${xs.filter((x) => x === Infinity).length} refused)`;
  };
  console.log(
    JSON.stringify({
      loadMs: s.loadMs,
      load: Number(load),
      seed: s.seed,
      policy: priority ? 'priority' : 'fcfs',
      interactive: within('interactive', 2000),
      batch: within('batch', 30000),
      byCause: misses.interactive!.byCause,
      queue: diagnose(timelines, causes, classes, 2000, adapters, {
        ...defaultEngineOptions,
        maxLoras: s.slots,
      }),
      wallS: (Date.now() - t0) / 1000,
    }),
  );
}

if (require.main === module) void main();
