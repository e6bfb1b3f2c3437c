import { join } from 'node:path';
import { loadCostFor } from '../sim/engine/load-cost';
import { parseRouterConfig } from '../src/config/parse';
import { SimFleet } from '../sim/fleet';
import type { ReplicaOptions } from '../sim/http/replica';
import { chatBody } from '../sim/workload/body';
import type { Arrival } from '../sim/workload/workload';
import { LocalGateway } from '../stack/gateway';
import { KongDriver, PluginServerProcess } from '../harness/kong/driver';
import { RedisServer } from '../harness/redis/server';
import { SLOS_MS, sloAttainment, type Scenario } from './des/run';
import { percentile as pct } from '../sim/workload/percentile';

/** The router's defaults (the simulation runs with them): the end-to-end run scales its bounds. */
const DEFAULTS = parseRouterConfig({ replicas: [{ url: 'http://127.0.0.1:1' }], base_model: 'base' });

/**
 * The simulation's router configuration (the defaults, in modelled time) in the wall-clock units
 * the plugin server lives by when modelled time runs `timeScale` times faster: every duration the
 * routing decision weighs shrinks by it, every rate grows by it. Before, only the staleness and
 * queue bounds were scaled: under `saturation_mode: predicted` the router then took replicas to
 * prefill at half their rate (10,000 tokens/s against 20,000 a wall second) until measured, and a
 * holder could run twice the margin (in modelled ms) behind before the adapter spread. Bounds on
 * calls (`load_timeout_ms`, `refresh_timeout_ms`) and the lease age stay: they only cut off
 * failures, and scaling them would make the loaded host's own delays look like failures.
 */
export function scaledDefaults(timeScale: number): Record<string, number> {
  const shorter = (ms: number, floor = 0) => Math.max(floor, Math.round(ms / timeScale));
  return {
    stale_after_ms: shorter(DEFAULTS.stale_after_ms, 50),
    queue_timeout_ms: shorter(DEFAULTS.queue_timeout_ms),
    replica_wait_ms: shorter(DEFAULTS.replica_wait_ms),
    saturation_margin_ms: shorter(DEFAULTS.saturation_margin_ms),
    ttft_tolerance_ms: shorter(DEFAULTS.ttft_tolerance_ms),
    ttft_slo_ms: shorter(DEFAULTS.ttft_slo_ms),
    backoff_base_ms: shorter(DEFAULTS.backoff_base_ms),
    backoff_max_ms: shorter(DEFAULTS.backoff_max_ms),
    prefill_tokens_per_second: DEFAULTS.prefill_tokens_per_second * timeScale,
    cold_loads_per_minute: Math.round(DEFAULTS.cold_loads_per_minute * timeScale),
    cold_loads_per_consumer_per_minute: Math.round(DEFAULTS.cold_loads_per_consumer_per_minute * timeScale),
  };
}

export interface E2eResult {
  policy: string;
  requests: number;
  completed: number;
  errors: number;
  loads: number;
  /** With refused requests counted as never answered (Infinity), as the simulation counts them. */
  ttftP50: number;
  ttftP99: number;
  /** Over the requests that were served. */
  ttftP99Served: number;
  /** Share of requests answered within the default SLO (refused: missed), as the simulation reports it. */
  sloAttainment: number;
  /**
   * Per request, in arrival order: the replica that answered (index into the fleet; -1: none),
   * TTFT as the client saw it and as the replica's engine recorded it (from its arrival there),
   * and the engine's own wait before the request joined the batch (modelled ms). The first minus
   * the second is what the gateway and the HTTP hops added; set for `e2e-long`'s comparison.
   */
  perRequest?: E2eRequest[];
  /**
   * Modelled ms the replicas' engine step timers fired late, per step, on average: the host's
   * lag, which the engine no longer lets add up (sim/engine/engine.ts chainAt).
   */
  engineLagMsPerStep?: number;
  /**
   * Client to the replica's engine, modelled ms, over served requests: the access phase (the
   * plugin server's RPC round trips, a load when the adapter is cold), and HTTP. Wall time, so a
   * busy host counts timeScale x here.
   */
  toEngineP50?: number;
  toEngineMean?: number;
}

export interface E2eRequest {
  replica: number;
  ttft: number;
  /** Client start to the replica's engine arrival (access phase, plugin RPC, HTTP), modelled ms. */
  toEngine?: number;
  /** Engine arrival to first token, modelled ms. */
  engineTtft?: number;
  /** Engine arrival to admission into the batch, modelled ms. */
  engineQueue?: number;
}

/**
 * The same workload through the local stack: simulated replicas over HTTP at `timeScale`, and
 * either lora-router in the real plugin server or Kong's round-robin upstream (replicas then
 * resolve adapters themselves). With `nodes` > 1, as many plugin servers (Kong nodes) share
 * fleet state in a real redis-server, and requests are dealt round robin over them. Times are
 * reported in modelled ms, like the simulation's.
 */
export async function runE2e(
  policy: 'lora-router' | 'round robin',
  s: Scenario,
  arrivals: Arrival[],
  adapters: string[],
  timeScale: number,
  nodes = 1,
  /** lora-router configuration beside the benchmark's (e.g. `saturation_mode`). */
  extra: Record<string, unknown> = {},
  /** The name results carry (default: the policy). */
  name: string = policy,
): Promise<E2eResult> {
  const router = policy === 'lora-router';
  const spec: ReplicaOptions = {
    adapterDirs: ['/adapters'],
    resolverDir: router ? undefined : '/adapters',
    timeScale,
    maxModelLen: 65536,
    engine: {
      ...s.engine,
      maxLoras: s.slots,
      maxCpuLoras: s.slots + 1,
      ...(s.loadMs === undefined ? {} : loadCostFor(s.loadMs, 16)),
    },
  };
  const fleet = await SimFleet.start(Array.from({ length: s.replicas }, () => ({ ...spec })));
  const redis = nodes > 1 ? await RedisServer.start() : undefined;
  const shared = redis ? { redis: redis.config('e2e:') } : {};
  const servers: PluginServerProcess[] = [];
  const gateways: LocalGateway[] = [];
  try {
    for (let n = 0; n < nodes; n++) {
      const server = await PluginServerProcess.start({ pluginsDir: join(__dirname, '..', 'plugins') });
      servers.push(server);
      const driver = new KongDriver(server.socketPath);
      // lora-poller answers the route it is attached to: it runs here as its own instance (in
      // Kong it sits on the status route), setting the process's poll interval.
      if (router)
        await driver.startInstance('lora-poller', {
          poll_interval_ms: Math.max(50, Math.round(500 / timeScale)),
          ...shared,
        });
      gateways.push(
        await LocalGateway.create({
          driver,
          // As kong.yml's OpenAI route: Kong's default buffering would hold every SSE chunk until
          // the answer ends, and time to first token would read as the whole answer's time.
          responseBuffering: false,
          plugins: router
            ? [
                {
                  name: 'lora-router',
                  config: {
                    replicas: fleet.urls.map((url) => ({ url })),
                    base_model: 'base',
                    adapter_path_template: '/adapters/{name}',
                    max_loaded_adapters: s.slots,
                    ...scaledDefaults(timeScale),
                    ...extra,
                    ...shared,
                  },
                },
              ]
            : [],
          serviceUrl: fleet.urls[0]!,
          upstreamTargets: router ? undefined : fleet.urls,
          timeouts: { read_timeout: 600_000 },
        }),
      );
    }
    const ttft: number[] = [];
    const perRequest: E2eRequest[] = arrivals.map(() => ({ replica: -1, ttft: Infinity }));
    const ports = fleet.urls.map((u) => Number(new URL(u).port));
    const clockAt = fleet.replicas.map((r) => ({ c: r.clock.now(), w: Date.now() }));
    let errors = 0;
    const t0 = Date.now();
    const one = async (a: Arrival, model: string, i: number): Promise<void> => {
      const started = Date.now();
      // The body the simulation's router reads too: as long as the request's prompt.
      const reply = await gatewayStream(gateways[i % gateways.length]!, chatBody(model, a));
      // The target lora-router set; else (Kong's balancer) the replica whose engine ran it.
      const replica = reply.target
        ? ports.indexOf(reply.target.port)
        : fleet.replicas.findIndex((r) => r.requestRecords().some((x) => x.id === reply.id));
      perRequest[i]!.replica = replica;
      if (reply.status !== 200) {
        // Never answered, as in the simulation: a refusal must not flatter the percentiles.
        errors++;
        ttft.push(Infinity);
        return;
      }
      const seen = (reply.firstAt - started) * timeScale;
      ttft.push(seen);
      perRequest[i]!.ttft = seen;
      const rec =
        replica >= 0 ? fleet.replicas[replica]!.requestRecords().find((r) => r.id === reply.id) : undefined;
      if (rec?.firstToken !== undefined) {
        // The replica's clock runs timeScale times faster than the wall clock from a common point.
        const at = clockAt[replica]!;
        const engineStartWall = at.w + (rec.arrival - at.c) / timeScale;
        perRequest[i]!.toEngine = (engineStartWall - started) * timeScale;
        perRequest[i]!.engineTtft = rec.firstToken - rec.arrival;
        perRequest[i]!.engineQueue = (rec.start ?? rec.firstToken) - rec.arrival;
      }
    };
    const running: Promise<void>[] = [];
    for (let i = 0; i < arrivals.length; i++) {
      const wait = t0 + arrivals[i]!.at / timeScale - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      running.push(one(arrivals[i]!, adapters[i]!, i));
    }
    await Promise.all(running);
    const loads = fleet.replicas.reduce(
      (n, r) =>
        n +
        r.adapterLog().filter((e) => e.op === 'load' && e.status === 200).length +
        r.engine.stats().cacheMissLoads,
      0,
    );
    for (const g of gateways) await g.close();
    const lag = fleet.replicas.map((r) => r.engine.lagStats());
    const toEngine = perRequest.flatMap((x) => (x.toEngine === undefined ? [] : [x.toEngine]));
    return {
      policy: name,
      requests: arrivals.length,
      completed: ttft.length - errors,
      errors,
      loads,
      ttftP50: pct(ttft, 0.5),
      ttftP99: pct(ttft, 0.99),
      ttftP99Served: pct(
        ttft.filter((x) => x !== Infinity),
        0.99,
      ),
      sloAttainment: sloAttainment(ttft, SLOS_MS[0]!),
      perRequest,
      toEngineP50: pct(toEngine, 0.5),
      toEngineMean: toEngine.reduce((a, b) => a + b, 0) / Math.max(1, toEngine.length),
      engineLagMsPerStep:
        lag.reduce((n, l) => n + l.totalMs, 0) /
        Math.max(
          1,
          lag.reduce((n, l) => n + l.steps, 0),
        ),
    };
  } finally {
    for (const server of servers) await server.stop();
    await fleet.stop();
    await redis?.close();
  }
}

/** One streaming request through the gateway's access, proxy and log path; the time of the first token. */
async function gatewayStream(gateway: LocalGateway, body: Buffer) {
  let firstAt = 0;
  let id = '';
  const reply = await gateway.handle(
    { path: '/v1/chat/completions', body, headers: { 'content-type': 'application/json' } },
    (chunk) => {
      if (!id) id = /"id":"([^"]+)"/.exec(chunk)?.[1] ?? '';
      if (!firstAt && /"content":"[^"]/.test(chunk)) firstAt = Date.now();
    },
  );
  return { status: reply.status, firstAt: firstAt || Date.now(), id, target: reply.kong.target };
}
