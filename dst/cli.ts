/**
 * `npm run dst -- --seeds N [--start S] [--steps K] [--span MS] [--node-ttl MS] [--workers W]`: explores N
 * schedules (seeds S.. S+N-1) over W worker processes and prints schedules per minute, the
 * workers' CPU seconds per schedule (steadier than the rate on a shared machine), the mean and the fewest
 * steps a schedule, a coverage table (per fault kind, the schedules that fired it with work under way; the
 * schedules where a node sent a load deciding alone) and, for each failing seed, the invariant it broke, the shrunk schedule and the replay command.
 * `npm run dst -- --seed S [--keep i,j,...]` replays one seed (or its shrunk schedule) exactly.
 * `--steps K`: actions (requests and faults) generated per schedule; the steps reported are the
 * events the scheduler fired. `--span MS`: ms of traffic and faults before the world settles
 * (default DEFAULT_SPAN_MS, 2000); a shorter span makes shorter schedules, more of them a minute.
 * `--node-ttl MS`: the nodes' node_ttl_ms for every seed (default: each seed draws 500 or 2000, half
 * each): shorter than the span, a node cut off reads a whole node count in time and grants its share
 * of cold loads alone; at 2000 it rarely does.
 * `--split`: where a schedule's CPU goes (dst/split.ts), in this process, seeds S.. S+N-1.
 * `--no-overload`: no crowds nor SLO classes (nor the shapes of dst/reach.ts), every schedule as
 * drawn before them (the seeds found before replay so). `--no-bound`: the class seeds without the bounded batch class (dst/overload.ts),
 * as drawn before it. `--no-reach`: without the shapes of dst/reach.ts (a configuration pushed right
 * after an emptied state, a class held behind a higher one), every seed as drawn before them.
 * `--no-prefetch`: prefetching never on (dst/prefetch-draw.ts), every seed's world as drawn before it.
 * `--no-clients`: no client gives up, no later plugin answers, no source call takes time
 * (dst/client-draw.ts), every seed's schedule as drawn before them.
 * `--no-config-changes`: no router configuration changes (dst/config-draw.ts; on by default here,
 * off by default in `generate`, so the seeds tests replay by number keep their schedules), every
 * seed's world and schedule as drawn before them.
 * `--no-record-moves`: with configuration changes, no lora-poller of its own and no move of a node's
 * router (dst/config-draw.ts `drawRecordPlugins`; on by default here, off in `generate`), every seed
 * as drawn before them.
 * `--digest`: after the summary, a line per seed (in seed order): its steps, simulated ms, the
 * scheduler's digest of when each step fired and a hash of the rest of its result (faults fired,
 * loads alone, refusals, bound waits, the invariant broken): two builds that print the same lines
 * replayed every seed the same (a refactor's proof).
 * The figures depend on the Node running it (a schedule took about 1.7 times the CPU on Node 20
 * that it took on Node 24, side by side), so each line names it.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { DEFAULT_OPTIONS, runSeed, shrink } from './run';
import { FAULT_KINDS, type FaultKind, type ScheduleOptions } from './schedule';
import { describeSplit, split } from './split';

interface Args {
  seeds: number;
  start: number;
  seed?: number;
  keep?: number[];
  actions: number;
  spanMs?: number;
  nodeTtlMs?: number;
  workers: number;
  shrink: boolean;
  split: boolean;
  /** Crowds and SLO classes drawn (`--no-overload`: off, the schedules as drawn before them). */
  overload: boolean;
  /** The bounded batch class drawn (`--no-bound`: off, the class seeds as drawn before it). */
  bound: boolean;
  /** The shapes of dst/reach.ts drawn (`--no-reach`: off, every seed as drawn before them). */
  reach: boolean;
  /** Prefetching drawn (`--no-prefetch`: off, every seed's world as drawn before it). */
  prefetch: boolean;
  /** Clients' and Kong's draws per request (`--no-clients`: off, every seed as drawn before them). */
  clients: boolean;
  /** A line per seed of what it replayed (`--digest`). */
  digest: boolean;
  /** Router configuration changes drawn (`--no-config-changes`: off, every seed as drawn before them). */
  configChanges: boolean;
  /** With them, lora-pollers of their own and moves (`--no-record-moves`: off, every seed as drawn before them). */
  recordMoves: boolean;
}

function parseArgs(argv: string[]): Args {
  const a: Args = {
    seeds: 100,
    start: 1,
    actions: DEFAULT_OPTIONS.actions,
    workers: 2,
    shrink: true,
    split: false,
    overload: true,
    bound: true,
    reach: true,
    prefetch: true,
    clients: true,
    digest: false,
    configChanges: true,
    recordMoves: true,
  };
  for (let i = 0; i < argv.length; i++) {
    const v = () => argv[++i] ?? '';
    switch (argv[i]) {
      case '--seeds':
        a.seeds = Number(v());
        break;
      case '--start':
        a.start = Number(v());
        break;
      case '--seed':
        a.seed = Number(v());
        break;
      case '--keep':
        a.keep = v()
          .split(',')
          .filter((x) => x !== '')
          .map(Number);
        break;
      case '--steps':
        a.actions = Number(v());
        break;
      case '--span':
        a.spanMs = Number(v());
        break;
      case '--node-ttl':
        a.nodeTtlMs = Number(v());
        break;
      case '--workers':
        a.workers = Math.max(1, Number(v()));
        break;
      case '--no-shrink':
        a.shrink = false;
        break;
      case '--split':
        a.split = true;
        break;
      case '--no-overload':
        a.overload = false;
        break;
      case '--no-bound':
        a.bound = false;
        break;
      case '--no-reach':
        a.reach = false;
        break;
      case '--no-prefetch':
        a.prefetch = false;
        break;
      case '--no-clients':
        a.clients = false;
        break;
      case '--digest':
        a.digest = true;
        break;
      case '--no-config-changes':
        a.configChanges = false;
        break;
      case '--no-record-moves':
        a.recordMoves = false;
        break;
      default:
        throw new Error(`unknown argument ${argv[i]}`);
    }
  }
  return a;
}

function options(a: Args): ScheduleOptions {
  return {
    actions: a.actions,
    ...(a.spanMs !== undefined ? { spanMs: a.spanMs } : {}),
    ...(a.nodeTtlMs !== undefined ? { nodeTtlMs: a.nodeTtlMs } : {}),
    ...(a.overload ? {} : { overload: false }),
    ...(a.bound ? {} : { bound: false }),
    ...(a.reach ? {} : { reach: false }),
    ...(a.prefetch ? {} : { prefetch: false }),
    ...(a.clients ? {} : { clients: false }),
    ...(a.configChanges ? { configChanges: true } : {}),
    ...(a.configChanges && a.recordMoves ? { recordMoves: true } : {}),
  };
}

/** What a worker reports for a batch of seeds. */
interface BatchReport {
  schedules: number;
  steps: number;
  /** The fewest steps of a schedule in the batch (the issue asks at least 100 each). */
  minSteps: number;
  /** By fault kind: schedules that fired it, and those that fired it with a request or load under way. */
  fired: Partial<Record<FaultKind, number>>;
  busy: Partial<Record<FaultKind, number>>;
  /** Schedules by their world's node_ttl_ms. */
  byNodeTtl: Record<string, number>;
  /** Schedules where a node sent a load call deciding alone, and those calls. */
  aloneSchedules: number;
  aloneLoads: number;
  /** Schedules that answered a 503 `ttft_overload` (a hold's end), and a 503 `shed_low_priority`. */
  ttftOverloadSchedules: number;
  shedSchedules: number;
  /** Schedules where a request of a class bounded by `max_in_flight` waited at its bound. */
  boundSchedules: number;
  /** Schedules with prefetching on, those whose ticks sent a load call, and those calls and victims' unloads. */
  prefetchSchedules: number;
  prefetchLoadSchedules: number;
  prefetchLoads: number;
  prefetchUnloads: number;
  /** Schedules with clients' or Kong's draws, those that logged a 499, and what they met (World `clients`). */
  clientSchedules: number;
  goneSchedules: number;
  clients: { gaveUp: number; ranOn: number; exits: number; slowSources: number; tells: number };
  /** Schedules where Kong's own 502/504 marked a replica down, those markings, and the requests proxied after one standing. */
  kongMarkSchedules: number;
  kongMarks: number;
  kongJudged: number;
  /** Schedules with configuration changes, those where the store forgot a replica, those forgets, and replicas listed again after. */
  configSchedules: number;
  forgetSchedules: number;
  forgotten: number;
  listedAgain: number;
  /** The worker's CPU (user and system) for the batch, µs. */
  cpuUs: number;
  failures: { seed: number; invariant: string; detail: string; step: number; at: number }[];
  /** By seed, what it replayed (`--digest`; empty without). */
  digests: { seed: number; line: string }[];
}

/** A 32-bit FNV-1a hash of a string (the `--digest` lines). */
function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** A seed's `--digest` line: the step times' digest, and a hash of everything else it reported. */
function digestLine(out: Awaited<ReturnType<typeof runSeed>>): string {
  const { steps, simMs, digest, schedule, ...rest } = out;
  const hex = (n: number) => (n >>> 0).toString(16).padStart(8, '0');
  return `${steps} steps ${simMs} ms ${hex(digest)} ${hex(fnv1a(JSON.stringify(rest)))} ${hex(fnv1a(JSON.stringify(schedule)))}`;
}

async function runBatch(from: number, to: number, o: ScheduleOptions, digests = false): Promise<BatchReport> {
  const r = emptyReport();
  const cpu = process.cpuUsage();
  for (let seed = from; seed < to; seed++) {
    const out = await runSeed(seed, o);
    r.schedules++;
    r.steps += out.steps;
    r.minSteps = Math.min(r.minSteps, out.steps);
    for (const k of out.faults.fired) r.fired[k] = (r.fired[k] ?? 0) + 1;
    for (const k of out.faults.busy) r.busy[k] = (r.busy[k] ?? 0) + 1;
    const ttl = String(out.schedule.world.nodeTtlMs ?? 'default');
    r.byNodeTtl[ttl] = (r.byNodeTtl[ttl] ?? 0) + 1;
    if (out.aloneLoads > 0) r.aloneSchedules++;
    r.aloneLoads += out.aloneLoads;
    if (out.overloadRefusals.ttftOverload > 0) r.ttftOverloadSchedules++;
    if (out.overloadRefusals.shed > 0) r.shedSchedules++;
    if (out.boundWaits > 0) r.boundSchedules++;
    if (out.kongMarks.marked > 0) r.kongMarkSchedules++;
    r.kongMarks += out.kongMarks.marked;
    r.kongJudged += out.kongMarks.judged;
    if (out.prefetch) {
      r.prefetchSchedules++;
      if (out.prefetch.loads > 0) r.prefetchLoadSchedules++;
      r.prefetchLoads += out.prefetch.loads;
      r.prefetchUnloads += out.prefetch.unloads;
    }
    if (out.clients) {
      r.clientSchedules++;
      if (out.clients.gaveUp > 0) r.goneSchedules++;
      for (const k of Object.keys(r.clients) as (keyof BatchReport['clients'])[])
        r.clients[k] += out.clients[k];
    }
    if (out.forgets) {
      r.configSchedules++;
      if (out.forgets.forgotten > 0) r.forgetSchedules++;
      r.forgotten += out.forgets.forgotten;
      r.listedAgain += out.forgets.listedAgain;
    }
    if (out.violation) r.failures.push({ seed, ...out.violation });
    if (digests) r.digests.push({ seed, line: digestLine(out) });
  }
  const used = process.cpuUsage(cpu);
  r.cpuUs = used.user + used.system;
  return r;
}

function emptyReport(): BatchReport {
  return {
    schedules: 0,
    steps: 0,
    minSteps: Infinity,
    fired: {},
    busy: {},
    byNodeTtl: {},
    aloneSchedules: 0,
    aloneLoads: 0,
    ttftOverloadSchedules: 0,
    shedSchedules: 0,
    boundSchedules: 0,
    prefetchSchedules: 0,
    prefetchLoadSchedules: 0,
    prefetchLoads: 0,
    prefetchUnloads: 0,
    clientSchedules: 0,
    goneSchedules: 0,
    clients: { gaveUp: 0, ranOn: 0, exits: 0, slowSources: 0, tells: 0 },
    kongMarkSchedules: 0,
    kongMarks: 0,
    kongJudged: 0,
    configSchedules: 0,
    forgetSchedules: 0,
    forgotten: 0,
    listedAgain: 0,
    cpuUs: 0,
    failures: [],
    digests: [],
  };
}

/** Folds a worker's batch into the run's total. */
function add(total: BatchReport, r: BatchReport): void {
  total.schedules += r.schedules;
  total.steps += r.steps;
  // Infinity does not survive IPC's JSON: an empty batch's minimum arrives as null.
  total.minSteps = Math.min(total.minSteps, r.minSteps ?? Infinity);
  total.cpuUs += r.cpuUs;
  total.failures.push(...r.failures);
  total.digests.push(...r.digests);
  for (const [ttl, n] of Object.entries(r.byNodeTtl)) total.byNodeTtl[ttl] = (total.byNodeTtl[ttl] ?? 0) + n;
  total.aloneSchedules += r.aloneSchedules;
  total.aloneLoads += r.aloneLoads;
  total.ttftOverloadSchedules += r.ttftOverloadSchedules;
  total.shedSchedules += r.shedSchedules;
  total.boundSchedules += r.boundSchedules;
  total.prefetchSchedules += r.prefetchSchedules;
  total.prefetchLoadSchedules += r.prefetchLoadSchedules;
  total.prefetchLoads += r.prefetchLoads;
  total.prefetchUnloads += r.prefetchUnloads;
  total.clientSchedules += r.clientSchedules;
  total.goneSchedules += r.goneSchedules;
  for (const k of Object.keys(total.clients) as (keyof BatchReport['clients'])[])
    total.clients[k] += r.clients[k];
  total.kongMarkSchedules += r.kongMarkSchedules;
  total.kongMarks += r.kongMarks;
  total.kongJudged += r.kongJudged;
  total.configSchedules += r.configSchedules;
  total.forgetSchedules += r.forgetSchedules;
  total.forgotten += r.forgotten;
  total.listedAgain += r.listedAgain;
  for (const k of FAULT_KINDS) {
    if (r.fired[k]) total.fired[k] = (total.fired[k] ?? 0) + r.fired[k];
    if (r.busy[k]) total.busy[k] = (total.busy[k] ?? 0) + r.busy[k];
  }
}

/**
 * Per fault kind, the share of schedules that fired it and that fired it while a request or a
 * load call was under way: a fast run that fires its faults on an idle world explores little.
 * Then the share where a node sent a cold load deciding alone (its budget share, which only a
 * node_ttl_ms shorter than the span reaches): a change that starves it shows there. Then the
 * shares that refused a request for overload (a crowd's hold-end refusal, a sheddable class's), and
 * the share where a batch request waited at its `max_in_flight` bound; then the share with
 * prefetching on, and with a load call a prefetch tick sent (its loads, and its victims' unloads);
 * then the share where Kong's own 502/504 marked a replica down, and the requests that came after a
 * marking no poll had undone (what the kong-mark check judges).
 */
function coverage(total: BatchReport): string {
  const per = Math.max(1, total.schedules);
  const pct = (n = 0) => `${((100 * n) / per).toFixed(1)}%`.padStart(7);
  const rows = FAULT_KINDS.map((k) => `  ${k.padEnd(16)}${pct(total.fired[k])}${pct(total.busy[k])}\n`);
  const ttls = Object.entries(total.byNodeTtl)
    .map(([ttl, n]) => `${ttl} ms ${pct(n).trim()}`)
    .join(', ');
  return (
    `fault kind         fired   busy (share of schedules; busy: a request or load under way)\n${rows.join('')}` +
    `  loads alone     ${pct(total.aloneSchedules)}         (${total.aloneLoads} load calls sent deciding alone; node_ttl_ms: ${ttls})\n` +
    `  overload        ${pct(total.ttftOverloadSchedules)}${pct(total.shedSchedules)}  (schedules refusing 503 ttft_overload at a hold's end; shed_low_priority)\n` +
    `  max_in_flight   ${pct(total.boundSchedules)}         (schedules where a bounded class's request waited at its bound)\n` +
    `  prefetch        ${pct(total.prefetchSchedules)}${pct(total.prefetchLoadSchedules)}  (schedules with prefetch on; with a prefetch load call: ${total.prefetchLoads} load calls, ${total.prefetchUnloads} victims' unloads)\n` +
    `  clients         ${pct(total.clientSchedules)}${pct(total.goneSchedules)}  (schedules with clients' draws; with a 499: ${total.clients.gaveUp} 499s, ${total.clients.ranOn} run on past it by the replica; ${total.clients.exits} later plugins' answers, ${total.clients.slowSources} slow source calls, ${total.clients.tells} ends told)\n` +
    `  kong 502/504    ${pct(total.kongMarkSchedules)}         (schedules where Kong's own 502/504 marked a replica down: ${total.kongMarks} markings; ${total.kongJudged} requests proxied after one no poll undid)\n` +
    `  config changes  ${pct(total.configSchedules)}${pct(total.forgetSchedules)}  (schedules with configuration changes; with a replica forgotten: ${total.forgotten} forgotten, ${total.listedAgain} listed again after)\n`
  );
}

/** Worker side: batches in, reports out, until told to stop. */
function worker(): void {
  process.on('message', (m: { from: number; to: number; o: ScheduleOptions; digests: boolean } | 'stop') => {
    if (m === 'stop') process.exit(0);
    void runBatch(m.from, m.to, m.o, m.digests).then((r) => process.send!(r));
  });
}

async function explore(a: Args): Promise<number> {
  const o = options(a);
  const started = Date.now();
  const total = emptyReport();
  let next = a.start;
  const end = a.start + a.seeds;
  const batch = Math.max(1, Math.min(200, Math.ceil(a.seeds / (a.workers * 8))));
  let lastPrint = started;
  // The last interval's rate beside the whole run's: the workers' JIT and heap settle over the first
  // few thousand schedules (0.019 CPU s a schedule over the first 1,000, 0.0118 over 20,000), so a
  // short run's average says less about a long run's speed than its latest interval does.
  let since = { at: started, schedules: 0, cpuUs: 0 };
  const print = (final = false) => {
    const now = Date.now();
    const min = (now - started) / 60_000;
    const per = Math.max(1, total.schedules);
    const line = `${total.schedules} schedules, ${Math.round(total.schedules / Math.max(min, 1e-9))}/min on ${a.workers} worker(s) (Node ${process.versions.node}), ${(total.cpuUs / 1e6 / per).toFixed(4)} CPU s/schedule, ${Math.round(total.steps / per)} steps/schedule (min ${total.minSteps}), ${total.failures.length} failing`;
    const n = total.schedules - since.schedules;
    const latest =
      !final && n > 0
        ? `; last ${((now - since.at) / 1000).toFixed(0)} s: ${Math.round(n / ((now - since.at) / 60_000))}/min, ${((total.cpuUs - since.cpuUs) / 1e6 / n).toFixed(4)} CPU s/schedule`
        : '';
    since = { at: now, schedules: total.schedules, cpuUs: total.cpuUs };
    process.stdout.write(`${final ? '' : '  '}${line}${latest}\n`);
  };
  const children: ChildProcess[] = [];
  await Promise.all(
    Array.from({ length: a.workers }, () => {
      const child = fork(__filename, ['--worker'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      children.push(child);
      return new Promise<void>((resolve, reject) => {
        const send = () => {
          if (next >= end) {
            child.send('stop');
            return;
          }
          const from = next;
          next = Math.min(end, next + batch);
          child.send({ from, to: next, o, digests: a.digest });
        };
        child.on('message', (r: BatchReport) => {
          add(total, r);
          // Said as found: a long sweep's failures would otherwise wait for its end.
          for (const f of r.failures) process.stdout.write(`  failing: seed ${f.seed}, ${f.invariant}\n`);
          if (Date.now() - lastPrint > 10_000) {
            lastPrint = Date.now();
            print();
          }
          send();
        });
        child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`worker exited ${code}`))));
        send();
      });
    }),
  );
  print(true);
  process.stdout.write(coverage(total));
  if (a.digest)
    for (const d of total.digests.sort((x, y) => x.seed - y.seed))
      process.stdout.write(`seed ${d.seed}: ${d.line}\n`);
  const cmd = (seed: number, keep?: number[]) =>
    `npm run dst -- --seed ${seed}${a.actions !== DEFAULT_OPTIONS.actions ? ` --steps ${a.actions}` : ''}${a.spanMs !== undefined ? ` --span ${a.spanMs}` : ''}${a.nodeTtlMs !== undefined ? ` --node-ttl ${a.nodeTtlMs}` : ''}${a.overload ? '' : ' --no-overload'}${a.bound ? '' : ' --no-bound'}${a.reach ? '' : ' --no-reach'}${a.prefetch ? '' : ' --no-prefetch'}${a.clients ? '' : ' --no-clients'}${a.configChanges ? '' : ' --no-config-changes'}${!a.configChanges || a.recordMoves ? '' : ' --no-record-moves'}${keep ? ` --keep ${keep.join(',')}` : ''}`;
  for (const f of total.failures.sort((x, y) => x.seed - y.seed).slice(0, 10)) {
    process.stdout.write(
      `\nseed ${f.seed}: ${f.invariant}: ${f.detail} (step ${f.step}, t=${f.at} ms)\n  replay: ${cmd(f.seed)}\n`,
    );
    if (!a.shrink) continue;
    const s = await shrink(f.seed, o, f.invariant);
    const full = (await runSeed(f.seed, o)).schedule;
    process.stdout.write(
      `  shrunk to ${s.keep.length} of ${full.actions.length} actions (${s.result.steps} steps): ${s.result.violation?.detail}\n` +
        s.keep.map((i) => `    ${JSON.stringify(full.actions[i])}\n`).join('') +
        `  replay shrunk: ${cmd(f.seed, s.keep)}\n`,
    );
  }
  return total.failures.length > 0 ? 1 : 0;
}

async function replay(a: Args): Promise<number> {
  const o = options(a);
  const r = await runSeed(a.seed!, o, a.keep);
  process.stdout.write(`world ${JSON.stringify(r.schedule.world)}\n`);
  for (const x of r.schedule.actions) process.stdout.write(`  ${JSON.stringify(x)}\n`);
  process.stdout.write(`${r.steps} steps, ${r.simMs} simulated ms\n`);
  if (!r.violation) {
    process.stdout.write('no invariant broken\n');
    return 0;
  }
  const v = r.violation;
  process.stdout.write(`${v.invariant}: ${v.detail} (step ${v.step}, t=${v.at} ms)\n`);
  if (a.shrink && !a.keep) {
    const s = await shrink(a.seed!, o, v.invariant);
    process.stdout.write(
      `shrunk to ${s.keep.length} actions (${s.result.steps} steps): npm run dst -- --seed ${a.seed} --keep ${s.keep.join(',')}\n`,
    );
  }
  return 1;
}

if (process.argv.includes('--worker')) worker();
else {
  const a = parseArgs(process.argv.slice(2));
  const run = a.split
    ? split(a.start, a.seeds, options(a)).then((s) => (process.stdout.write(describeSplit(s)), 0))
    : a.seed !== undefined
      ? replay(a)
      : explore(a);
  run.then(
    (code) => process.exit(code),
    (err: Error) => {
      process.stderr.write(`${err.stack ?? err.message}\n`);
      process.exit(2);
    },
  );
}
