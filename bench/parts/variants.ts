import { atRate } from '../../sim/workload/workload';
import { runPoint } from '../des/point';
import * as P from '../des/policies';
import { mean, type VariantRow } from '../goals';
import { cells, fmtNum, ms, table } from '../report';
import { ACCOUNTING, type BenchPart, VARIANTS } from './context';

/** lora-router's eviction and placement variants A/B'd (issue 9). */
export const variantsPart: BenchPart = {
  name: 'variants',
  async run(c) {
    const { full, seeds, scenario, mainLoad, capacity, workload, log, json, md, v } = c;
    const alphas = v.alphas ? v.alphas.split(',').map(Number) : full ? [0.8, 1.0, 1.2, 0] : [1.0, 0.8];
    const variants = full ? VARIANTS : VARIANTS.filter((x) => x.quick);
    const n = full ? 6000 : 1500;
    log(
      `variants at ${mainLoad * 100}% load, Zipf ${alphas.join(', ')} (0 = uniform), seeds ${seeds.join(', ')}, ${n} requests:`,
    );
    const rows: Omit<VariantRow, 'load'>[] = [];
    for (const alpha of alphas) {
      for (const seed of seeds) {
        const arrivals = atRate(workload.slice(0, n), capacity * mainLoad);
        const policies = [P.oracle, ...variants.map((v) => P.loraRouter(v.name, v.config))];
        const point = await runPoint(policies, { ...scenario, alpha, seed }, arrivals);
        // The oracle gave the pinned bound's intervals; the table compares the variants.
        const results = point.results.filter((r) => r.policy !== P.oracle.name);
        rows.push({ alpha, seed, belady: point.belady, pinned: point.pinned, results });
        log(
          `  alpha ${alpha} seed ${seed}: ${results.map((r) => `${r.policy} ${r.loads} loads, p99 ${ms(r.ttftP99)}`).join(' · ')}`,
        );
      }
    }
    json.variants = rows;
    md.push(
      ...variantsSection(
        rows,
        variants.map((x) => x.name),
        alphas,
        Math.min(n, workload.length),
        mainLoad,
      ),
    );
  },
};

function variantsSection(
  rows: Omit<VariantRow, 'load'>[],
  names: string[],
  alphas: number[],
  n: number,
  load: number,
): string[] {
  const out: string[] = [
    '## Eviction and placement variants',
    '',
    `lora-router configurations on the same requests: ${n.toLocaleString('en-US')} requests at ${load * 100}% load, seeds ${[...new Set(rows.map((r) => r.seed))].join(', ')} (mean, min–max). \`lru\` evicts the least recently used idle adapter. \`value\` evicts the idle adapter with the least decayed request frequency per fleet copy. \`victim placement\` (\`scorer_weights.victim\`) sends a cold adapter where the cheapest victim is. \`consolidate\` prefers the holder used last. \`escalate\` (\`room_wait: escalate\`, the default) loads on the chosen replica if it can load now, else waits for room on any replica, 503 only \`queue_timeout_ms\` (29 s) after the request came; \`wait on the chosen replica\` (\`room_wait: replica\`, 10 s, the old default) queues a cold load behind that replica's busy adapters and answers 503 after \`queue_timeout_ms\`; \`wait for room anywhere\` (\`room_wait: anywhere\`, 10 s) adds the \`room\` filter and waits for an idle adapter on any replica. ${ACCOUNTING}`,
    '',
  ];
  for (const alpha of alphas) {
    const at = rows.filter((r) => r.alpha === alpha);
    out.push(
      `**${alpha === 0 ? 'uniform popularity' : `Zipf ${alpha}`}**: over all requests, Belady ${fmtNum(mean(at.map((x) => x.belady)))} loads, Belady with in-flight pinning ${fmtNum(mean(at.map((x) => x.pinned)))}.`,
      '',
      table(
        [
          'variant',
          'refused',
          'loads',
          'hit rate (served)',
          '÷ Belady (served)',
          '÷ pinned Belady (served)',
          'TTFT p50',
          'TTFT p99',
          'served p99',
        ],
        names.map((name) => [
          name,
          ...cells(at, name, [
            'errors',
            'loads',
            'hitRate',
            'beladyRatio',
            'pinnedRatio',
            'ttftP50',
            'ttftP99',
            'ttftP99Served',
          ]),
        ]),
      ),
      '',
    );
  }
  return out;
}
