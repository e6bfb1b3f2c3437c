import { overheadGoal, requestPathGoals, type BenchResults } from '../goals';
import {
  decisionHeap,
  HEAP_PROMPT_CHARS,
  fleetAtScale,
  measureOverhead,
  type OverheadRow,
  pluginServerCpu,
  prefixScorerCost,
  redisRoundTrips,
} from '../overhead';
import { bodyReadCost, coldRouteRelease } from '../request-path';
import { table } from '../report';
import { type BenchPart } from './context';

/** Request-path overhead through the real plugin server, fleet state at scale, heap per decision. */
export const overheadPart: BenchPart = {
  name: 'overhead',
  async run(c) {
    const { full, log, json, md } = c;
    log('request-path overhead (real kong-js-pluginserver, access + log):');
    const iterations = full
      ? { '1 KB': 5000, '100 KB': 1000, '1 MB': 150 }
      : { '1 KB': 1500, '100 KB': 400, '1 MB': 50 };
    const rows = await measureOverhead(iterations, log);
    const pairs = full ? 10_000 : 4000;
    const cpu = { ...(await pluginServerCpu(pairs)), pairs };
    log(
      `  plugin-server CPU per 1 KB access + log: lora-router ${cpu.routerUs.toFixed(0)} µs, no-op ${cpu.noopUs.toFixed(0)} µs (${pairs} each)`,
    );
    const bodyRead = bodyReadCost();
    log(
      `  reading the body in process: ${bodyRead.map((b) => `${b.size} ${b.parseBodyUs.toFixed(1)} µs (of which UTF-8 decoding ${b.decodeUs.toFixed(1)} µs)`).join(', ')}`,
    );
    const cold = await coldRouteRelease();
    log(
      `  route + release in process, CPU alone: ${cold.hotUs.toFixed(1)} µs back to back, ${cold.coldUs.toFixed(0)} µs each after a ${cold.gapMs} ms sleep`,
    );
    const mem = await fleetAtScale(64, 10_000);
    log(
      `  fleet state, 64 replicas x 10k adapters: ${mem.mb.toFixed(1)} MB, ${mem.usPerDecision.toFixed(0)} µs per decision`,
    );
    const predicted = await fleetAtScale(64, 10_000, 'predicted');
    log(`  the same under saturation_mode predicted: ${predicted.usPerDecision.toFixed(0)} µs per decision`);
    const prefix = prefixScorerCost();
    log(`  prefix scorer (index full, 8 candidates): ${prefix.usPerDecision.toFixed(2)} µs per decision`);
    const heap = await decisionHeap([10_000, 1_000_000], log);
    const trips = await redisRoundTrips();
    log(`  Redis round trips, resident adapter: ${trips.access} in access, ${trips.log} in log`);
    json.overhead = {
      rows,
      memory: mem,
      heap,
      prefixScorer: prefix,
      predictedUsPerDecision: predicted.usPerDecision,
      redisRoundTrips: trips,
      pluginServerCpu: cpu,
      routeReleaseCold: cold,
      bodyRead,
    };
    md.push(...overheadReport(json));
  },
  fromResults: { key: 'overhead', section: (r) => overheadReport(r) },
};

/** The part's section of bench/results/README.md, from its results. */
function overheadReport(r: BenchResults): string[] {
  const o = r.overhead!;
  return [...overheadSection(o.rows, o.memory, o.heap), ...pluginServerLines(o), ...requestPathSection(o)];
}

/** What the plugin server's share is made of, from the figures measured beside the rows (absent in older results). */
function pluginServerLines(o: NonNullable<BenchResults['overhead']>): string[] {
  const lines: string[] = [];
  if (o.bodyRead)
    lines.push(
      `- Reading the body (\`parseBody\`: UTF-8 decoding, \`JSON.parse\`, the \`model\` and the checks), in process: ${o.bodyRead.map((b) => `${b.size} ${b.parseBodyUs < 100 ? b.parseBodyUs.toFixed(1) : b.parseBodyUs.toFixed(0)} µs`).join(', ')}.`,
    );
  if (o.pluginServerCpu && o.routeReleaseCold)
    lines.push(
      `- CPU of the plugin server per 1 KB access + log (its process's time, counted over ${o.pluginServerCpu.pairs} of each, interleaved): lora-router ${o.pluginServerCpu.routerUs.toFixed(0)} µs, no-op ${o.pluginServerCpu.noopUs.toFixed(0)} µs. Both plugins make the same 4 + 2 PDK calls, so the difference is the routing core's: route + release takes ${o.routeReleaseCold.hotUs.toFixed(1)} µs of CPU back to back in process but ${o.routeReleaseCold.coldUs.toFixed(0)} µs when each call follows a ${o.routeReleaseCold.gapMs} ms sleep, which is how the plugin server runs it (it sleeps in epoll between PDK replies while Kong and the other processes run, and the decision's code and data are out of the caches when it wakes).`,
    );
  return lines.length > 0 ? [...lines, ''] : [];
}

/** The request path's four budget figures, goal beside result (bench/goals.ts `requestPathGoals`). */
export function requestPathSection(o: NonNullable<BenchResults['overhead']>): string[] {
  return [
    table(
      ['request path', 'goal', 'result', ''],
      requestPathGoals(o).map((g) => [
        g.name,
        g.goal,
        g.result,
        g.met === undefined ? 'not measured' : g.met ? 'met' : '**missed**',
      ]),
    ),
    '',
  ];
}

function overheadSection(
  rows: OverheadRow[],
  mem: { mb: number; perEntryBytes: number; usPerDecision: number },
  heap: { decisions: number; heapMb: number; usPerDecision: number }[],
): string[] {
  const { worst, met, pdkMet: pdkOk } = overheadGoal(rows);
  const growth = heap.at(-1)!.heapMb - heap[0]!.heapMb;
  return [
    '## Request-path overhead',
    '',
    'One access and one log event through the real `kong-js-pluginserver`, driven as Kong drives it (harness/kong/driver.ts). lora-router has the adapter resident and a fresh snapshot. The no-op plugin makes the same PDK calls and decides nothing. The two run interleaved in one process.',
    '',
    table(
      [
        'body',
        'events',
        'lora-router p50',
        'p99',
        'no-op p50',
        'p99',
        'ratio p50',
        'ratio p99',
        'PDK calls access / log (most of any request)',
      ],
      rows.map((r) => [
        r.size,
        r.iterations,
        `${r.router.totalP50.toFixed(3)} ms`,
        `${r.router.totalP99.toFixed(3)} ms`,
        `${r.noop.totalP50.toFixed(3)} ms`,
        `${r.noop.totalP99.toFixed(3)} ms`,
        r.ratioP50,
        r.ratioP99,
        `${r.pdkAccess} / ${r.pdkLog}`,
      ]),
    ),
    '',
    `Access alone, lora-router vs no-op (p50): ${rows.map((r) => `${r.size} ${r.router.accessP50.toFixed(3)} vs ${r.noop.accessP50.toFixed(3)} ms`).join('; ')}.`,
    '',
    `- Goal: ratio ≤ 1.15 at every body size — ${met ? `**met** (worst median ratio ${worst.toFixed(3)})` : `**missed**: worst median ratio ${worst.toFixed(3)}`}. The plugin parses the whole JSON body (the \`model\`, the token estimate, and the errors of docs/errors.md for a body that is no JSON object), which the no-op does not (its cost in process: the line on reading the body below), and that is most of what the 1 MB row adds. The no-op's own time at 1 MB fell from 63 ms (the run at 7b52b95) to under 2 ms (a02bb13) when the plugin server stopped writing every message's arguments as JSON and joining a long message's chunks again for each chunk (pluginserver/socket.ts, 7ae0742), so the same parse is now a larger ratio (1.09 then; the worst ratio above now). At 1 KB the body costs 3 µs; the budget there is in the request-path table below.`,
    `- Goal: ≤ 4 PDK calls in access, ≤ 2 in log — ${pdkOk ? '**met**' : '**missed**'} (the most any request made: ${rows[0]!.pdkAccess} and ${rows[0]!.pdkLog}).`,
    `- Fleet state for 64 replicas × 10,000 resident adapters: **${mem.mb.toFixed(1)} MB** of heap (${Math.round(mem.perEntryBytes)} bytes per replica-adapter entry); one decision at that size (every replica's view, then the pipeline) takes ${mem.usPerDecision.toFixed(0)} µs.`,
    `- Heap after ${heap.map((h) => `${h.decisions.toLocaleString('en-US')} decisions: ${h.heapMb.toFixed(1)} MB`).join(', ')} (in-process route + release, 8 replicas, ${HEAP_PROMPT_CHARS.toLocaleString('en-US')}-character prompts, ${heap.at(-1)!.usPerDecision.toFixed(1)} µs per decision): growth ${growth.toFixed(1)} MB, ${Math.abs(growth) < 5 ? 'no leak' : '**investigate**'}.`,
    '',
  ];
}
