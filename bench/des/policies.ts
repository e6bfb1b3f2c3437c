import { parseRouterConfig } from '../../src/config/parse';
import type { VirtualClock } from '../../src/clock';
import { silentLogger } from '../../src/log';
import { seededRandom, type Random } from '../../src/random';
import { RouterService } from '../../src/router/router';
import { FleetRuntime } from '../../src/runtime';
import type { Arrival } from '../../sim/workload/workload';
import { chatBody } from '../../sim/workload/body';
import type { AdapterMode, DesFleet } from './fleet';
import { sharedStoreHandles } from './shared-store';

/** Where one request goes, or the error status the router answered. */
export type Routed =
  | {
      url: string;
      token?: string;
      predictedMs?: number;
      /** vLLM's `priority` the router set in the body (`vllm_scheduling_policy: priority`), if it did. */
      priority?: number;
    }
  | { error: number };

/** One request as a router sees it: the adapter, and its arrival (token counts) for the body. */
export interface DesRequest {
  adapter: string;
  arrival: Arrival;
  /** The SLO class the request names (`x-gateway-inference-objective`), if any. */
  sloClass?: string;
}

/** How a routed request ended: the replica's status, and its time to first token when served. */
export interface DesOutcome {
  status: number;
  ttftMs?: number;
}

export interface DesRouter {
  route(req: DesRequest): Promise<Routed>;
  done(url: string, token: string | undefined, outcome: DesOutcome): Promise<void>;
  stop(): void;
}

export interface Policy {
  name: string;
  mode: AdapterMode;
  /** The adapter load time this policy's fleet runs with, when not the scenario's (a bound's free loads). */
  loadMs?: number;
  create(clock: VirtualClock, fleet: DesFleet, seed: number, slots: number): DesRouter;
}

/** lora-router as deployed: the real RouterService, store, poller and adapter manager. */
export function loraRouter(name = 'lora-router', extra: Record<string, unknown> = {}): Policy {
  return loraRouterNodes(1, name, extra);
}

/**
 * lora-router on `nodes` Kong nodes sharing one store (as with Redis): each node has its own
 * runtime (adapter manager, in-process claims, poller), requests are dealt round robin over
 * the nodes as a load balancer in front of Kong does.
 */
export function loraRouterNodes(
  nodes: number,
  name = `lora-router, ${nodes} nodes`,
  extra: Record<string, unknown> = {},
): Policy {
  return {
    name,
    mode: 'managed',
    create(clock, fleet, seed, slots) {
      const stores = nodes === 1 ? [undefined] : sharedStoreHandles(clock, nodes);
      const config = parseRouterConfig({
        replicas: fleet.urls.map((url) => ({ url })),
        base_model: 'base',
        adapter_path_template: '/adapters/{name}',
        max_loaded_adapters: slots,
        ...extra,
      });
      const members = stores.map((store, i) => {
        const rt = new FleetRuntime({
          clock,
          store,
          api: fleet,
          log: silentLogger,
          seed: i === 0 ? seed : seed * 31 + i,
          poller: { intervalMs: 500, timeoutMs: 1000 },
        });
        return { rt, svc: new RouterService(config, rt) };
      });
      const routedBy = new Map<string, RouterService>();
      let next = 0;
      return {
        async route({ adapter, arrival, sloClass }) {
          const { svc } = members[next++ % members.length]!;
          // Built here and dropped after the decision: memory stays bounded by the requests in flight.
          const body = chatBody(adapter, arrival);
          const slo = sloClass === undefined ? undefined : async () => ({ objective: sloClass });
          const out = await svc.route({ path: '/v1/chat/completions', body, slo });
          if (out.kind !== 'proxy') return { error: out.status };
          routedBy.set(out.leaseId, svc);
          // A rewritten body carries vLLM's priority (a vLLM replica's body is rewritten for nothing else).
          const priority =
            out.body === undefined ? undefined : (JSON.parse(out.body) as { priority?: number }).priority;
          return {
            url: out.url,
            token: out.leaseId,
            predictedMs: out.predictedTtftMs,
            ...(priority === undefined ? {} : { priority }),
          };
        },
        // The status only, as Kong's log phase gives it (plugins/lora-router.ts `giveBack`): it
        // sees no TTFT (latencies.proxy is time to response headers, which vLLM streams at once),
        // so the work model learns the prefill rate from the replica's scraped histograms alone.
        async done(_url, token, { status }) {
          const svc = routedBy.get(token!)!;
          routedBy.delete(token!);
          await svc.finish(token!, status);
        },
        stop: () => members.forEach((m) => m.rt.stop()),
      };
    },
  };
}

/** A router that tracks only its own in-flight counts (Kong's balancers do no more). */
export function counting(
  fleet: DesFleet,
  pick: (adapter: string, inFlight: number[], random: Random, req: DesRequest) => number,
  seed: number,
  hooks: {
    /** Called before the request joins replica i's in-flight count, `inFlight` requests there. */
    routed?: (i: number, req: DesRequest, inFlight: number) => void;
    done?: (i: number, req: DesRequest, o: DesOutcome) => void;
  } = {},
): DesRouter {
  const inFlight = fleet.urls.map(() => 0);
  const random = seededRandom(seed);
  const pending = new Map<string, { i: number; req: DesRequest }>();
  let nextId = 0;
  return {
    async route(req) {
      const i = pick(req.adapter, inFlight, random, req);
      hooks.routed?.(i, req, inFlight[i]!);
      inFlight[i]!++;
      const token = String(nextId++);
      pending.set(token, { i, req });
      return { url: fleet.urls[i]!, token };
    },
    async done(_url, token, outcome) {
      const p = pending.get(token!)!;
      pending.delete(token!);
      inFlight[p.i]!--;
      hooks.done?.(p.i, p.req, outcome);
    },
    stop: () => undefined,
  };
}

export function leastIndex(xs: number[], random: Random): number {
  const min = Math.min(...xs);
  const ties = xs.flatMap((x, i) => (x === min ? [i] : []));
  return ties[Math.floor(random() * ties.length)]!;
}

export const roundRobin: Policy = {
  name: 'round robin',
  mode: 'resolver',
  create(_clock, fleet, seed) {
    let next = 0;
    return counting(fleet, () => next++ % fleet.urls.length, seed);
  },
};

export const leastRequest: Policy = {
  name: 'least request',
  mode: 'resolver',
  create: (_clock, fleet, seed) => counting(fleet, (_a, inFlight, r) => leastIndex(inFlight, r), seed),
};

/** Kong's consistent-hashing balancer on the `model` value: a ring with virtual nodes. */
export const consistentHash: Policy = {
  name: 'consistent hash (model)',
  mode: 'resolver',
  create(_clock, fleet, seed) {
    const ring: [number, number][] = [];
    fleet.urls.forEach((u, i) => {
      for (let v = 0; v < 160; v++) ring.push([fnv(`${u}#${v}`), i]);
    });
    ring.sort((a, b) => a[0] - b[0]);
    return counting(
      fleet,
      (adapter) => {
        const h = fnv(adapter);
        const p = ring.find(([x]) => x >= h) ?? ring[0]!;
        return p[1];
      },
      seed,
    );
  },
};

/**
 * llm-d-style soft affinity: LoRA score 1 (adapter running there), 0.8 (a free slot among
 * running adapters), 0.6 (adapter waiting there), else 0, from `lora_requests_info`; plus
 * queue and KV scorers, equal weights, max-score. Metrics scraped every 50 ms, as llm-d does.
 */
export const llmdSoftAffinity: Policy = {
  name: 'llm-d soft affinity',
  mode: 'resolver',
  create(clock, fleet, seed, slots) {
    const random = seededRandom(seed);
    type Snap = { waiting: number; kv: number; running: Set<string>; waitingSet: Set<string> };
    let snaps: Snap[] = [];
    const refresh = () => {
      snaps = fleet.engines.map((e) => {
        const s = e.stats();
        return {
          waiting: s.waiting,
          kv: s.kvUsage,
          running: new Set(s.runningAdapters),
          waitingSet: new Set(s.waitingAdapters),
        };
      });
    };
    refresh();
    let cancel = clock.after(50, function tick() {
      refresh();
      cancel = clock.after(50, tick);
    });
    const router = counting(
      fleet,
      (adapter) => {
        const qs = snaps.map((s) => s.waiting);
        const qmin = Math.min(...qs);
        const qmax = Math.max(...qs);
        const scores = snaps.map((s) => {
          const lora = s.running.has(adapter)
            ? 1
            : s.running.size < slots
              ? 0.8
              : s.waitingSet.has(adapter)
                ? 0.6
                : 0;
          const queue = qmax > qmin ? (qmax - s.waiting) / (qmax - qmin) : 1;
          return (lora + queue + (1 - s.kv)) / 3;
        });
        const best = Math.max(...scores);
        const ties = scores.flatMap((x, i) => (x === best ? [i] : []));
        return ties[Math.floor(random() * ties.length)]!;
      },
      seed,
    );
    return { ...router, stop: () => cancel() };
  },
};

/** Unlimited adapter slots and free loads, least-request routing: what TTFT could be. */
export const oracle: Policy = {
  name: 'oracle (unlimited slots)',
  mode: 'oracle',
  create: (_clock, fleet, seed) => counting(fleet, (_a, inFlight, r) => leastIndex(inFlight, r), seed),
};

export function fnv(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}
