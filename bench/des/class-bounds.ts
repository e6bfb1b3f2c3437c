/**
 * Issue 34: is a missed point of the classes part the router's to fix, or past what the fleet
 * gives? Per class, the share within its objective for lora-router with `slo_classes`, the same
 * with loads that take no time (what placement leaves without load time), and the fleet pooled
 * into one engine (no loads, perfect balance, first come first served: bench/des/bounds.ts), on
 * the same requests.
 *
 * With it, the engine time the loads take against the time the requests need: the offered load
 * (of the fleet's capacity without loads) plus loads x load time / (replicas x the arrivals'
 * span), with the router's loads and with Belady's (one cache of replicas x slots adapters: no
 * placement needs fewer). Past 1 with Belady's, no placement keeps up.
 *
 * `node dist/bench/des/class-bounds.js LOAD_MS LOAD SEED TRACE` (after `npm run build`).
 */
import { CLASS_POLICY } from '../goals';
import { beladyMisses } from './belady';
import { TWO_CLASSES } from '../workloads';
import { freeLoads, pooledBound } from './bounds';
import * as P from './policies';
import { runPolicy } from './run';
import { conversationClassPointFromArgs } from './slo-classes';

async function main(): Promise<void> {
  const { load, s, arrivals, adapters, classes } = conversationClassPointFromArgs(process.argv.slice(2));
  const classed = P.loraRouter(CLASS_POLICY, {
    slo_classes: TWO_CLASSES.classes,
    default_slo_class: 'interactive',
  });
  const out: Record<string, Record<string, string | number>> = {};
  const spanMs = arrivals[arrivals.length - 1]!.at - arrivals[0]!.at;
  const busy = (loads: number) =>
    Number((load + (loads * (s.loadMs ?? 0)) / (s.replicas * spanMs)).toFixed(3));
  const belady = beladyMisses(adapters, s.replicas * s.slots);
  for (const policy of [classed, freeLoads(classed), pooledBound]) {
    const r = await runPolicy(policy, s, arrivals, adapters, { classes });
    out[policy.name] = {};
    for (const c of TWO_CLASSES.classes) {
      const xs = r.ttftOf!.filter((_, i) => classes[i] === c.name);
      out[policy.name]![c.name] =
        `${((100 * xs.filter((x) => x <= c.ttft_ms).length) / xs.length).toFixed(1)}%`;
    }
    if (policy === classed) out[policy.name] = { ...out[policy.name], loads: r.loads, busy: busy(r.loads) };
  }
  console.log(
    JSON.stringify({
      loadMs: s.loadMs,
      load,
      seed: s.seed,
      spanS: spanMs / 1000,
      belady,
      beladyBusy: busy(belady),
      ...out,
    }),
  );
}

if (require.main === module) void main();
