/**
 * Where the loads that stalled late requests went, against where they could have gone (issue 34,
 * the stall a cold load imposes on the requests already on its replica). Per seed, for each load
 * lora-router made: the requests running and waiting on its engine when it was asked for, and on
 * every other engine the same with whether a load could start there at once (a free slot, or a
 * registered adapter no request there uses: an idle victim). A load "had a gentler place" when
 * another replica with such room held fewer requests (running + waiting).
 *
 *   node dist/bench/des/stall-placement.js WORKLOAD LOAD_MS LOAD SEEDS [CONFIG_JSON [TRACE]]
 *   e.g. node dist/bench/des/stall-placement.js bursty 300 0.3 1
 */
import { recordTimelines, type Timeline } from './class-misses';
import { recordedLoads, type LoadTimes } from './load-anatomy';
import { loraRouter, type Policy } from './policies';
import { adapterSequence, runPolicy, type Scenario } from './run';
import { sloPoint } from './slo-point';

const SLO_MS = 5000;

interface Snapshot {
  requests: number;
  waiting: number;
  /** A load could start there now: a free slot or an idle registered adapter. */
  room: boolean;
}

/** A load and the engines as they stood when it was asked for: its own, and every other. */
type Placed = LoadTimes & { here: Snapshot; others: Snapshot[] };

function recording(p: Policy, out: Placed[]): Policy {
  return recordedLoads(p, out, (fleet, i, _adapter, slots) => {
    const snapshot = (j: number): Snapshot => {
      const e = fleet.engines[j]!;
      const q = e.queueView();
      const registered = fleet.registeredOn(j);
      return {
        requests: q.running.length + q.waiting.length,
        waiting: q.waiting.length,
        room: registered.length < slots || registered.some((a) => e.inFlight(a) === 0),
      };
    };
    const others = fleet.engines
      .map((_, j) => j)
      .filter((j) => j !== i)
      .map(snapshot);
    return { here: snapshot(i), others };
  });
}

async function main(): Promise<void> {
  const [workload = 'bursty', loadMs = '300', load = '0.3', seeds = '1', config = '{}', trace] =
    process.argv.slice(2);
  const { scenario, arrivals } = sloPoint(workload, Number(load), trace);
  const extra = JSON.parse(config) as Record<string, unknown>;
  for (const seed of seeds.split(',').map(Number)) {
    const s: Scenario = { ...scenario, seed, loadMs: Number(loadMs) };
    const adapters = adapterSequence(arrivals.length, s);
    const loads: Placed[] = [];
    const timelines: (Timeline | undefined)[] = [];
    const r = await runPolicy(recording(loraRouter('lora-router', extra), loads), s, arrivals, adapters, {
      served: recordTimelines(timelines, arrivals),
    });
    let stalling = 0;
    let gentler = 0;
    let gentlerIdle = 0;
    let pairsLate = 0;
    let pairsLateGentler = 0;
    let lateThere = 0;
    let lateJoined = 0;
    let hereRequests = 0;
    let bestRequests = 0;
    for (const l of loads) {
      let late = 0;
      timelines.forEach((t, i) => {
        if (t && t.url === l.url && adapters[i] !== l.adapter && l.start < t.start && l.end > t.routed)
          if (t.first - t.at > SLO_MS) {
            late++;
            // There when the load was asked for (a placement could have spared it), or sent after.
            if (t.routed <= l.asked) lateThere++;
            else lateJoined++;
          }
      });
      if (late === 0) continue;
      stalling++;
      pairsLate += late;
      const roomy = l.others.filter((o) => o.room);
      const best = Math.min(...roomy.map((o) => o.requests));
      hereRequests += l.here.requests;
      bestRequests += Number.isFinite(best) ? best : l.here.requests;
      if (best < l.here.requests) {
        gentler++;
        pairsLateGentler += late;
      }
      if (roomy.some((o) => o.requests === 0)) gentlerIdle++;
    }
    console.log(
      `${workload} ${loadMs} ms ${Number(load) * 100}% seed ${seed}: SLO ${(r.sloAttainment * 100).toFixed(1)}%, loads ${loads.length}; ` +
        `loads that stalled a late request ${stalling} (late request x load pairs ${pairsLate}); ` +
        `of them with another replica holding fewer requests and room for the load at once ${gentler} (pairs ${pairsLateGentler}), ` +
        `with an idle replica with room ${gentlerIdle}; late pairs there when the load was asked for ${lateThere}, sent there after ${lateJoined}; ` +
        `mean requests on the chosen replica ${(hereRequests / Math.max(1, stalling)).toFixed(1)}, ` +
        `on the least busy one with room ${(bestRequests / Math.max(1, stalling)).toFixed(1)}`,
    );
  }
}

if (require.main === module) void main();
