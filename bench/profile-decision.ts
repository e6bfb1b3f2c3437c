import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { GCProfiler, getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { accessLogBed } from './access-log-bed';
import { decisionBed, pluginServerCpu, routeBed } from './overhead';
import { pollRoundBed } from './poll-round-bed';
import { variedBed } from './varied-fleet';

/**
 * What one request-path operation costs, counted rather than timed (a busy machine makes wall
 * time noise): one decision at 64 replicas x 10,000 adapters (count and predicted saturation,
 * bench/overhead.ts `decisionBed`) and in-process route + release (`routeBed`).
 *
 *   node dist/bench/profile-decision.js                 CPU µs per call (process.cpuUsage) and
 *       bytes allocated per call (`allocatedPerCall`: counted, so the same on a busy machine)
 *   node dist/bench/profile-decision.js --callgrind     instructions per call: two runs under
 *       valgrind's callgrind, `warm` and `warm + n` calls, their difference / n (setup and
 *       JIT warm-up cancel out; a collection that falls in one run and not the other does not:
 *       a negative or outsized figure says so, run again or raise --n)
 *   node dist/bench/profile-decision.js --picks         a digest of every call's pick, to show
 *       that a change decides exactly as before (same inputs, same seed)
 *   --case decision-count|decision-predicted|route-release (default all three), --n, --warm
 *   --case decision-varied    (with --picks) predicted decisions on a seeded fleet that differs
 *       replica by replica and moves between decisions (bench/varied-fleet.ts): its digest covers
 *       every candidate's prediction and score, so a change to the work model or the pipeline
 *       that moves any figure, not only a pick, shows
 *   --case route-release-cold   route + release each after a 1 ms sleep, only the call counted:
 *       cache-cold, as the plugin server runs it after epoll (bench/request-path.ts `coldRouteRelease`)
 *   --case access-log         lora-router's access + log in process, 1 KB, adapter resident, its PDK
 *       answering at once (bench/access-log-bed.ts): the plugin glue and the routing core as the
 *       request-path goal counts them, without msgpack or the socket
 *   --case poll-round         one round of the replica poller (bench/poll-round-bed.ts): one vLLM
 *       replica's /metrics and /v1/models over HTTP, read and applied; the replica runs in a
 *       process of its own, so only the poller's side is counted
 *   --case plugin-server      the real plugin server's CPU time per 1 KB access + log event
 *       pair, lora-router against the no-op plugin (bench/overhead.ts `pluginServerCpu`)
 */
const HELP =
  'Usage: node dist/bench/profile-decision.js [--case NAME] [--n N] [--warm W] [--callgrind | --picks]';

const CASES = ['decision-count', 'decision-predicted', 'route-release'] as const;
type Case = (typeof CASES)[number] | 'decision-varied' | 'access-log' | 'route-release-cold' | 'poll-round';

/** `route-release-cold`: each call after this sleep, as the plugin server runs a request after epoll. */
const COLD_GAP_MS = 1;

/** One case's operation, the i-th call returning what it picked (a replica's URL). */
async function operation(name: Case): Promise<{ op: (i: number) => Promise<string>; stop: () => void }> {
  if (name === 'decision-varied') {
    const bed = await variedBed(64, 10_000, 1);
    return { op: bed.decide, stop: () => {} };
  }
  if (name === 'poll-round') {
    const bed = await pollRoundBed();
    return { op: bed.pollRound, stop: bed.stop };
  }
  if (name === 'access-log') {
    const bed = await accessLogBed();
    return { op: bed.accessLog, stop: bed.stop };
  }
  if (name === 'route-release' || name === 'route-release-cold') {
    const bed = await routeBed();
    return { op: bed.routeRelease, stop: bed.stop };
  }
  const bed = await decisionBed(64, 10_000, name === 'decision-count' ? 'count' : 'predicted');
  return {
    op: async (i) => {
      const d = await bed.decide(i);
      return d === null ? 'none' : `${d.replica.url} ${d.stage}`;
    },
    stop: () => {},
  };
}

/**
 * Runs `warm` calls, then `n` more; returns the CPU µs a call of the last `n` took and their picks'
 * digest, and with `alloc`, the bytes a call allocates after them (`allocatedPerCall`).
 */
async function inner(
  name: Case,
  warm: number,
  n: number,
  alloc = false,
): Promise<{ cpuUs: number; digest: string; bytes?: number }> {
  const { op, stop } = await operation(name);
  const hash = createHash('sha256');
  for (let i = 0; i < warm; i++) hash.update(await op(i));
  let us = 0;
  if (name === 'route-release-cold') {
    // Only the call is counted, not the sleep's timer (bench/request-path.ts `coldRouteRelease`).
    for (let i = warm; i < warm + n; i++) {
      await new Promise((r) => setTimeout(r, COLD_GAP_MS));
      const t0 = process.cpuUsage();
      hash.update(await op(i));
      const t = process.cpuUsage(t0);
      us += t.user + t.system;
    }
  } else {
    const t0 = process.cpuUsage();
    for (let i = warm; i < warm + n; i++) hash.update(await op(i));
    const t = process.cpuUsage(t0);
    us = t.user + t.system;
  }
  const bytes = alloc ? await allocatedPerCall(op, warm + n) : undefined;
  stop();
  return { cpuUs: n > 0 ? us / n : 0, digest: hash.digest('hex').slice(0, 16), bytes };
}

/**
 * Bytes of heap one call allocates, garbage included: batches of `BATCH` calls, each begun on an
 * empty young generation (a minor collection) and counted as the heap's growth over the batch; a
 * batch during which any collection ran (v8.GCProfiler) is left out. The median batch's figure
 * per call: the same on a busy machine, unlike time, and what the collector later pays for.
 * Node has no counter of bytes allocated (v8's `total_allocated_bytes` is not exposed).
 */
async function allocatedPerCall(op: (i: number) => Promise<string>, from: number): Promise<number> {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as (o?: { type: 'minor' | 'major' }) => void;
  const BATCH = 50;
  const perCall: number[] = [];
  let i = from;
  for (let b = 0; b < 40; b++) {
    gc({ type: 'minor' });
    const profiler = new GCProfiler();
    profiler.start();
    const before = getHeapStatistics().used_heap_size;
    for (let k = 0; k < BATCH; k++) await op(i++);
    const grown = getHeapStatistics().used_heap_size - before;
    if (profiler.stop().statistics.length === 0) perCall.push(grown / BATCH);
  }
  if (perCall.length === 0) throw new Error('a collection ran during every batch: no allocation figure');
  perCall.sort((a, b) => a - b);
  return perCall[perCall.length >> 1]!;
}

/** Instructions callgrind counted for one run of this script: `warm` calls of `name`, then `n` more. */
function instructions(name: Case, warm: number, n: number): number {
  const dir = mkdtempSync(join(tmpdir(), 'profile-decision-'));
  try {
    const r = spawnSync(
      'valgrind',
      [
        '--tool=callgrind',
        `--callgrind-out-file=${join(dir, 'out')}`,
        process.execPath,
        // No concurrent compiler or GC threads: both runs then do the same work up to the
        // measured calls, and their difference is the calls' own.
        '--single-threaded',
        __filename,
        '--inner',
        '--case',
        name,
        '--warm',
        String(warm),
        '--n',
        String(n),
      ],
      { encoding: 'utf8', maxBuffer: 64 << 20 },
    );
    const m = /Collected : (\d+)/.exec(r.stderr);
    if (r.status !== 0 || !m) throw new Error(`callgrind failed (${r.status}): ${r.stderr.slice(-2000)}`);
    return Number(m[1]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const { values: v } = parseArgs({
    options: {
      case: { type: 'string' },
      n: { type: 'string' },
      warm: { type: 'string' },
      callgrind: { type: 'boolean' },
      picks: { type: 'boolean' },
      inner: { type: 'boolean' },
      help: { type: 'boolean' },
    },
  });
  if (v.help) return console.log(HELP);
  if (v.case === 'plugin-server') {
    const n = Number(v.n ?? 10_000);
    const r = await pluginServerCpu(n);
    return console.log(
      `plugin-server, 1 KB access + log: lora-router ${r.routerUs.toFixed(1)} µs CPU, no-op ${r.noopUs.toFixed(1)} µs CPU (${n} each): ${(r.routerUs - r.noopUs).toFixed(1)} µs added`,
    );
  }
  const cases = (v.case === undefined ? [...CASES] : v.case.split(',')) as Case[];
  for (const c of cases)
    if (
      c !== 'decision-varied' &&
      c !== 'access-log' &&
      c !== 'route-release-cold' &&
      c !== 'poll-round' &&
      !CASES.includes(c)
    )
      throw new Error(`unknown case ${c}; ${HELP}`);
  if (v.inner) {
    const r = await inner(cases[0]!, Number(v.warm ?? 0), Number(v.n ?? 0));
    return console.log(JSON.stringify(r));
  }
  for (const c of cases) {
    if (v.callgrind) {
      // Under valgrind a decision at 64 x 10,000 runs ~50x slower: fewer calls than timed.
      const warm = Number(v.warm ?? 300);
      const n = Number(v.n ?? 300);
      const per = (instructions(c, warm, n) - instructions(c, warm, 0)) / n;
      console.log(`${c}: ${Math.round(per / 1000)}k instructions per call (${n} calls after ${warm})`);
    } else if (v.picks) {
      const r = await inner(c, 0, Number(v.n ?? 5000));
      console.log(`${c}: picks digest ${r.digest} (${v.n ?? 5000} calls)`);
    } else {
      // The best of 3 rounds: the other engineers' processes only ever add.
      let best = Infinity;
      let bytes = 0;
      for (let k = 0; k < 3; k++) {
        const r = await inner(c, Number(v.warm ?? 2000), Number(v.n ?? 5000), k === 0);
        best = Math.min(best, r.cpuUs);
        bytes = r.bytes ?? bytes;
      }
      console.log(
        `${c}: ${best.toFixed(1)} µs CPU per call (best of 3 rounds), ${Math.round(bytes)} bytes allocated per call`,
      );
    }
  }
}

main().catch((err: Error) => {
  console.error(err.stack ?? String(err));
  process.exit(1);
});
