/**
 * The benchmark page's figures (docs/benchmarks.md), generated from bench/results/results.json as
 * the configuration reference is generated from the Schema: `npm run bench` (or `npm run docs`)
 * rewrites what lies between each region's markers, and test/core/readme.test.ts keeps the page
 * in sync.
 *
 * Data-driven so that a new part of the benchmark is an addition: give it a renderer in PARTS
 * (the page's summary, in order) or a region of its own in REGIONS. A renderer returns nothing
 * when its part did not run. Renderers link from the repository's root; the page is in docs/,
 * so `withBenchSections` moves every relative link one folder up.
 */
import {
  BASELINES,
  e2eGoal,
  mean,
  nodesGoal,
  overheadGoal,
  PEERS,
  qualityGoals,
  type BenchResults,
} from './goals';
import { goalListTable } from './goal-list';
import { peerTally } from './des/peers-report';
import { fmtNum, fmtPct, fmtRatio, ms, spread, table } from './report';
import { sloTally } from './des/slo-sweep';
import { chartFile, decisionGoal, tally25 } from './des/slo-goals-25';
import { e2eLongSection } from './parts/e2e-long';
import { requestPathSection } from './parts/overhead';
import { tokensSection } from './parts/tokens';
import { prefillSection } from './parts/prefill';

type Renderer = (r: BenchResults) => string[] | undefined;

const verdict = (met: boolean) => (met ? '**met**' : '**missed**');
const seedsOf = (xs: { seed: number }[]) => [...new Set(xs.map((x) => x.seed))];
const range = (xs: number[]) =>
  xs.length > 1 ? `${fmtRatio(mean(xs))} (seeds: ${xs.map(fmtRatio).join(', ')})` : fmtRatio(xs[0]!);

const provenance: Renderer = (r) => {
  // Parts merged from a run of their own (bench/merge.ts) name it.
  const own = Object.entries(r.runs ?? {}).map(
    ([name, run]) =>
      `${name} by \`${run.command}\`${run.commit ? ` at \`${run.commit.slice(0, 12)}\`` : ''}, ${run.date.slice(0, 10)}`,
  );
  return [
    `Figures from \`npm run bench${r.full ? ' -- --full' : ''}\` at commit ${r.commit ? `\`${r.commit.sha.slice(0, 12)}\`${r.commit.dirty ? ' with uncommitted changes' : ''}` : 'unknown'}, ${r.date.slice(0, 10)}${r.cores ? `, ${r.cores} cores` : ''}${r.node ? `, Node ${r.node}` : ''}${own.length ? `; parts measured by a run of their own: ${own.join('; ')}` : ''}. Every figure and verdict in this section is generated from [bench/results/results.json](bench/results/results.json); ratios compare figures measured in the same run. Loads and hit rate count served requests only, for every policy alike, with refusals beside them. "TTFT p99" counts a refused request as never answered; "served p99" leaves refusals out.`,
  ];
};

/** Issue 34's goals, each with its verdict and a link to its table per point. */
const goals: Renderer = (r) => [
  "**Issue 34's goals**, each over the points it applies to (a point: workload, adapter load time and fleet load, means over its seeds); the linked tables give every point and why a missed one is missed.",
  '',
  goalListTable(r),
];

const overhead: Renderer = (r) => {
  const o = r.overhead;
  if (!o) return undefined;
  const g = overheadGoal(o.rows);
  const heap = o.heap;
  return [
    `**Request path.** One access plus log event through the real \`kong-js-pluginserver\`, against a no-op plugin making the same PDK calls. Median ratio: ${o.rows.map((x) => `${x.ratioP50.toFixed(2)} (${x.size} body)`).join(', ')}; goal ≤ 1.15: ${verdict(g.met)}. PDK calls ${o.rows[0]!.pdkAccess} in access and ${o.rows[0]!.pdkLog} in log (goal ≤ 4 and ≤ 2: ${verdict(g.pdkMet)}). Fleet state for 64 replicas × 10,000 resident adapters: ${o.memory.mb.toFixed(0)} MB of heap, one decision ${o.memory.usPerDecision.toFixed(0)} µs. Heap ${heap.map((h) => `${h.heapMb.toFixed(1)} MB after ${h.decisions.toLocaleString('en-US')} in-process decisions`).join(', ')} (${heap.at(-1)!.usPerDecision.toFixed(0)} µs each).${o.prefixScorer ? ` The prefix scorer with its index full: ${o.prefixScorer.usPerDecision.toFixed(1)} µs per decision.` : ''}`,
    '',
    ...requestPathSection(o),
  ];
};

/** The sweep's points other than the main load (one seed, fewer requests), then the main table. */
/**
 * The seed's routing goals on the conversation trace at the main load, in one paragraph; the
 * table per load is in bench/results/README.md.
 */
const quality: Renderer = (r) => {
  const q = r.quality;
  if (!q) return undefined;
  const g = qualityGoals(q);
  const router = g.router;
  return [
    `**Routing quality** (the conversation trace at ${fmtPct(r.mainLoad ?? 0.7).replace('.0%', '%')} load, seeds ${seedsOf(q).join(', ')}; [per load](bench/results/README.md#routing-quality-discrete-event-simulation)). lora-router answers ${fmtPct(mean(router.map((x) => x.sloAttainment)))} of requests within 5 s against ${fmtPct(mean(g.best.map((x) => x.sloAttainment)))} for the best baseline, refusing ${spread(
      router.map((x) => x.errors / x.requests),
      fmtPct,
    )}. Loads ≤ 1.2× Belady: ${verdict(g.met.loads)}, ${range(g.loadsRatio)}${g.met.loads ? '' : ` (${range(g.pinnedRatio)} against Belady that cannot unload an adapter with requests in flight)`}. TTFT p99 ≤ 1.3× the unlimited-slot oracle: ${verdict(g.met.oracle)}, ${range(g.oracleRatio)}. TTFT p99 ≤ 0.5× the best baseline: ${verdict(g.met.baseline)}, ${range(g.baselineRatio)}. Adapters unloaded under a request: ${g.busyUnloads}.`,
  ];
};

const nodes: Renderer = (r) => {
  const n = r.nodes;
  const e = r.e2e;
  if (!n && !e) return undefined;
  const out: string[] = [];
  if (n) {
    const g = nodesGoal(n.runs);
    out.push(
      `**Several Kong nodes.** Three nodes sharing one store, with requests dealt round robin over them, made ${fmtNum(mean(n.runs.map((x) => x.three.loads)))} adapter loads (${fmtNum(mean(n.runs.map((x) => x.three.errors)))} refused) against ${fmtNum(mean(n.runs.map((x) => x.one.loads)))} (${fmtNum(mean(n.runs.map((x) => x.one.errors)))} refused) for one node: ${n.runs.map((x, i) => `${g.ratios[i]!.toFixed(3)}×`).join(', ')} the loads per served request per seed; goal within 5%: ${verdict(g.met)}. Busy unloads: ${n.runs.reduce((k, x) => k + x.three.busyUnloads, 0)}.`,
    );
  }
  if (e) {
    const one = e.e2e[0]!;
    const three = e.threeNodes.e2e;
    out.push(
      `End to end, three plugin servers sharing a real \`redis-server\` made ${three.loads} loads on the ${one.requests}-request run against ${one.loads} for one (${fmtRatio(three.loads / one.loads)}), refused ${three.errors} against ${one.errors}; TTFT p50 ${ms(three.ttftP50)} against ${ms(one.ttftP50)}, served p99 ${ms(three.ttftP99Served)} against ${ms(one.ttftP99Served)}.`,
    );
  }
  return [out.join(' ')];
};

const e2e: Renderer = (r) => {
  const e = r.e2e;
  if (!e) return undefined;
  const g = e2eGoal(e);
  return [
    `**End to end vs simulation** (the conversation trace, ${e.e2e[0]!.requests} requests, 4 replicas × 4 slots, through the real plugin server and HTTP to the simulator${e.timeScale ? ` at time scale ${e.timeScale}` : ''}; [tables](bench/results/README.md#end-to-end-vs-simulation)). Round robin ÷ lora-router agreeing within 10% between the two: ${verdict(g.met)} (${g.rows.map((x) => `${x.name} ${fmtRatio(x.sim)} vs ${fmtRatio(x.real)}, ${x.diff >= 0 ? '+' : ''}${(x.diff * 100).toFixed(1)}%`).join('; ')}).`,
  ];
};

/** The long-context workload end to end beside the simulation. */
const e2eLong: Renderer = (r) => r.e2eLong && asParagraph(e2eLongSection(r.e2eLong));

/** The prompt-token estimate's measured error. */
const tokenEstimate: Renderer = (r) => r.tokenEstimate && asParagraph(tokensSection(r.tokenEstimate));

/** The TTFT prediction's error with prefix caching, prompt- against computed-token learning. */
const prefill: Renderer = (r) => r.prefill && asParagraph(prefillSection(r.prefill));

/** A bench/results section as one paragraph of the page: its heading becomes the bold lead. */
function asParagraph(lines: string[]): string[] {
  const [head, , first, ...rest] = lines;
  return [`**${head!.replace(/^#+ /, '')}.** ${first!}`, ...rest];
}

/** The parts README only points to: their tables are in bench/results/README.md. */
const more: Renderer = (r) => {
  const parts = [
    r.loadTimeSweep && '[the adapter load-time sweep](bench/results/README.md#adapter-load-time-sweep)',
    r.unload && "[vLLM's unload as released](bench/results/README.md#vllm-unload-as-released)",
    r.variants?.length &&
      '[eviction and placement variants](bench/results/README.md#eviction-and-placement-variants)',
    r.sweep && '[the load sweep](bench/results/README.md#load-sweep)',
  ].filter((x): x is string => typeof x === 'string');
  return parts.length
    ? [`Also measured, with their tables in bench/results/README.md: ${parts.join(', ')}.`]
    : undefined;
};

/**
 * Routing under bursts and long prompts: a short summary with the charts; the
 * goal tables per point are in bench/results/README.md.
 */
const slo: Renderer = (r) => {
  const x = r.slo;
  if (!x) return undefined;
  const router = x.variants[0]!;
  const workloads = [...new Set(x.points.map((p) => p.workload))];
  const loadTimes = [...new Set(x.points.map((p) => p.loadMs))].sort((a, b) => a - b);
  const seeds = [...new Set(x.points.map((p) => p.seed))];
  const t15 = sloTally(x.points, router);
  const t25 = tally25(x.points, router);
  const d = decisionGoal(r.overhead);
  const present = new Set(x.points[0]!.results.map((p) => p.policy));
  const baselines = BASELINES.filter((b) => present.has(b)).length;
  const chart = (w: string, l: number) => `![${w}, ${ms(l)} loads](bench/results/${chartFile(w, l)})`;
  const peers = x.points[0]!.results.some((p) => PEERS.includes(p.policy))
    ? peerTally(x.points, router)
    : undefined;
  return [
    `**Routing under bursts and long prompts: SLO attainment.** Each workload (${workloads.join(', ')}) at adapter load times ${loadTimes.map(ms).join(', ')} and fleet loads ${[...new Set(x.points.map((p) => p.load))].map((l) => `${l * 100}%`).join(', ')} of the fleet's capacity for that workload's token mix, ${x.requests.toLocaleString('en-US')} requests per point, seeds ${seeds.join(', ')}; the share of requests with TTFT within 5 s, a refusal counting as a miss, per policy (lora-router as configured by default, ${baselines} baselines and the unlimited-slot oracle). Goals per point (no refusal at or below 50% load, SLO ≥ the best baseline, TTFT p99 ≤ 0.5× it, SLO ≥ 0.9× the oracle, loads ≤ 1.2× the fewest possible) met: ${t15.met} of ${t15.of}. Headline goals: ${t25.map((t) => `${t.name} ${t.met} of ${t.of}`).join('; ')}; 5. one decision ≤ 100 µs and the request path ratio: ${d ? `${d.met ? 'met' : 'missed'} (${d.us.toFixed(0)} µs, ${d.ratio.toFixed(2)})` : 'not measured in this run'}. Every goal per point, with why a missed one is missed, and each variant's trade: [bench/results/README.md](bench/results/README.md#routing-under-bursts-slo-attainment).${
      peers
        ? ` Against the peers' strongest setups as they run them (${PEERS.join('; ')}) and two bounds (the fleet pooled in one engine with every adapter resident; the fleet's slots with loads that take no time), per point: SLO ≥ the peers' best ${peers.vsPeers.met} of ${peers.vsPeers.of}; SLO ≥ 0.9× the pooled bound with loads ≤ 0.3 s ${peers.vsPooled.met} of ${peers.vsPooled.of}; load/unload operations per served request ≤ Dynamo's min-cost-flow controller's at equal or better SLO ${peers.churn.met} of ${peers.churn.of}; TTFT p99 below capacity ≤ the best baseline's ${peers.p99.met} of ${peers.p99.of} ([per point, with churn per policy](bench/results/README.md#issue-34-the-peers-as-they-run-and-the-bounds)). The charts draw lora-router, the best baseline at each load, the peers' best at each load, the two bounds and the oracle.`
        : ''
    }`,
    '',
    table(
      ['workload', ...loadTimes.map((l) => `${ms(l)} loads`)],
      workloads.map((w) => [w, ...loadTimes.map((l) => chart(w, l))]),
    ),
  ];
};

/** The page's summary, part by part; SLO attainment, what users feel, leads. */
const PARTS: Renderer[] = [
  provenance,
  goals,
  slo,
  overhead,
  e2eLong,
  tokenEstimate,
  prefill,
  quality,
  nodes,
  e2e,
  more,
];

const redisCost: Renderer = (r) => {
  const n = r.nodes;
  if (!n) return ['(`npm run bench -- --only nodes` has not run.)'];
  const c = n.redisCost;
  const f = (x: number) => `${x.toFixed(2)} ms`;
  const g = nodesGoal(n.runs);
  return [
    `**What it costs** (\`npm run bench -- --only nodes\`, measured through the real plugin server against a real \`redis-server\` on loopback, ${r.cores ?? '?'} cores shared by all of them): a request for a resident adapter makes two Redis calls: the views and the lease in one script in the access phase (the lease taken where the adapter's last request went, and moved if the decision goes elsewhere), the release in the log phase, which Kong runs after the response. Here that adds ${f(c.redis.accessP50 - c.memory.accessP50)} to the median access phase (${f(c.redis.accessP50)} against ${f(c.memory.accessP50)} in process) and ${f(c.redis.p50 - c.memory.p50)} to access + log (${f(c.redis.p50)} against ${f(c.memory.p50)}; the no-op plugin takes ${f(c.noop.p50)}). Each call is one round trip to Redis, so on a network add its round-trip time twice. In the routing benchmark three nodes sharing the store made ${fmtNum(mean(n.runs.map((x) => x.three.loads)))} adapter loads against ${fmtNum(mean(n.runs.map((x) => x.one.loads)))} for one node (${g.ratios.map((x) => x.toFixed(3)).join(', ')}× the loads per served request, per seed; goal within 5%: ${verdict(g.met)}).`,
  ];
};

/** Each generated region of docs/benchmarks.md: its name in the markers, and what fills it. */
export const REGIONS: Record<string, Renderer> = {
  benchmarks: (r) =>
    PARTS.flatMap((part) => {
      const lines = part(r);
      return lines ? [...lines, ''] : [];
    }),
  'redis-cost': redisCost,
};

export const begin = (name: string) =>
  `<!-- bench:${name}:begin (generated from bench/results/results.json: npm run bench, or npm run docs) -->`;
export const end = (name: string) => `<!-- bench:${name}:end -->`;

/** Where the regions live, from the repository's root. */
export const BENCH_PAGE = 'docs/benchmarks.md';

/** Relative link targets (written from the root) as seen from a page one folder down. */
const fromDocs = (md: string) => md.replace(/\]\((?![a-z][a-z0-9+.-]*:|#)([^)]+)\)/gi, '](../$1)');

/** The benchmark page with every region regenerated from `results` (not yet prettier-formatted). */
export function withBenchSections(page: string, results: BenchResults): string {
  let out = page;
  for (const [name, render] of Object.entries(REGIONS)) {
    const i = out.indexOf(begin(name));
    const j = out.indexOf(end(name));
    if (i < 0 || j < i) throw new Error(`${BENCH_PAGE} has no ${begin(name)} ... ${end(name)} markers`);
    const body = fromDocs((render(results) ?? []).join('\n').trim());
    out = out.slice(0, i + begin(name).length) + '\n\n' + body + '\n\n' + out.slice(j);
  }
  return out;
}
