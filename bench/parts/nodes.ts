import { atRate } from '../../sim/workload/workload';
import * as P from '../des/policies';
import { adapterSequence, type PolicyResult, runPolicy } from '../des/run';
import { nodesGoal, type NodesRun } from '../goals';
import { measureRedisCost, type RedisCost } from '../overhead';
import { METRICS, spread, table } from '../report';
import { type BenchPart } from './context';

/** Several Kong nodes sharing one store vs one node, and the per-request cost of Redis (issue 8). */
export const nodesPart: BenchPart = {
  name: 'nodes',
  async run(c) {
    const { full, seeds, scenario, mainLoad, capacity, workload, log, json, md } = c;
    log(
      `three Kong nodes sharing one store vs one node, ${mainLoad * 100}% load (seeds ${seeds.join(', ')}):`,
    );
    const runs: NodesRun[] = [];
    for (const seed of seeds) {
      const s = { ...scenario, seed };
      const arrivals = atRate(workload, capacity * mainLoad);
      const adapters = adapterSequence(arrivals.length, s);
      const [one, three] = [
        await runPolicy(P.loraRouter(), s, arrivals, adapters),
        await runPolicy(P.loraRouterNodes(3), s, arrivals, adapters),
      ];
      delete one.intervals;
      delete three.intervals;
      runs.push({ seed, one, three });
      log(
        `  seed ${seed}: loads ${one.loads} (1 node) vs ${three.loads} (3 nodes); refused ${one.errors} vs ${three.errors}`,
      );
    }
    log('per-request cost of Redis (real kong-js-pluginserver and redis-server, access + log):');
    const cost = await measureRedisCost(full ? 5000 : 1500, log);
    json.nodes = { runs, redisCost: cost };
    md.push(...nodesSection(runs, cost, mainLoad));
  },
};

function nodesSection(runs: NodesRun[], cost: RedisCost, load: number): string[] {
  const { ratios, met } = nodesGoal(runs);
  const row = (name: string, pick: (r: NodesRun) => PolicyResult) => [
    name,
    ...(['errors', 'loads', 'hitRate', 'ttftP50', 'ttftP99Served', 'busyUnloads'] as const).map((k) =>
      spread(
        runs.map((r) => METRICS[k][0](pick(r))),
        METRICS[k][1],
      ),
    ),
  ];
  const f = (x: number) => `${x.toFixed(3)} ms`;
  return [
    '## Several Kong nodes sharing fleet state',
    '',
    `Three Kong nodes, each with its own adapter manager, in-process claims and poller, share one store (the FleetStore contract the Redis store passes in \`test/core/fleet-store.test.ts\`, with Redis pub/sub's wake-ups), and requests are dealt round robin over them, as a load balancer in front of Kong does. Same scenario and workload as above at ${load * 100}% load; each cell is the mean over seeds ${runs.map((r) => r.seed).join(', ')} (min–max).`,
    '',
    table(
      ['lora-router', 'refused', 'loads', 'hit rate (served)', 'TTFT p50', 'served p99', 'busy unloads'],
      [row('1 node', (r) => r.one), row('3 nodes, shared store', (r) => r.three)],
    ),
    '',
    `- Goal: loads per served request with three nodes within 5% of one node — ${met ? '**met**' : '**missed**'}: ${ratios.map((r) => `${r.toFixed(3)}×`).join(', ')}.`,
    '',
    `Per-request cost of Redis, measured through the real plugin server against a real redis-server on loopback (1 KB body, adapter resident, ${cost.iterations.toLocaleString('en-US')} requests each, interleaved): access + log median ${f(cost.redis.p50)} with Redis vs ${f(cost.memory.p50)} in process (${f(cost.redis.p50 - cost.memory.p50)} more, ${(cost.redis.p50 / cost.memory.p50).toFixed(2)}×), p99 ${f(cost.redis.p99)} vs ${f(cost.memory.p99)}; the no-op plugin takes ${f(cost.noop.p50)}. The access phase alone, which the client waits for (Kong runs the log phase after the response), takes ${f(cost.redis.accessP50)} vs ${f(cost.memory.accessP50)} (${f(cost.redis.accessP50 - cost.memory.accessP50)} more). A resident adapter's request makes three Redis calls, each one Lua script: two in access (views, lease), one in log (release).`,
    '',
  ];
}
