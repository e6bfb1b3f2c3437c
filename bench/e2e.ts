import { join } from 'node:path';
import { loadCostFor } from '../sim/engine/load-cost';
import { parseRouterConfig } from '../src/config/parse';
import { SimFleet } from '../sim/fleet';
import type { ReplicaOptions } from '../sim/http/replica';
import { chatBody } from '../sim/workload/body';
import type { Arrival } from '../sim/workload/workload';
import { LocalGateway } from '../stack/gateway';
import { KongDriver, PluginServerProcess } from '../test/kong/driver';
import { RedisServer } from '../test/helpers/redis';
import { SLOS_MS, sloAttainment, type Scenario } from './des/run';
import { percentile as pct } from '../sim/workload/percentile';

/** The router's defaults (the simulation runs with them): the end-to-end run scales its bounds. */
const DEFAULTS = parseRouterConfig({ replicas: [{ url: 'http://127.0.0.1:1' }], base_model: 'base' });

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
                    // Modelled durations shrink by timeScale; so do the router's own bounds.
                    stale_after_ms: Math.max(50, Math.round(DEFAULTS.stale_after_ms / timeScale)),
                    queue_timeout_ms: Math.round(DEFAULTS.queue_timeout_ms / timeScale),
                    ...shared,
                  },
                },
              ]
            : [],
          serviceUrl: fleet.urls[0]!,
          upstreamTargets: router ? undefined : fleet.urls,
          upstreamTimeoutMs: 600_000,
        }),
      );
    }
    const ttft: number[] = [];
    let errors = 0;
    const t0 = Date.now();
    const one = async (a: Arrival, model: string, i: number): Promise<void> => {
      const started = Date.now();
      // The body the simulation's router reads too: as long as the request's prompt.
      const reply = await gatewayStream(gateways[i % gateways.length]!, chatBody(model, a));
      if (reply.status !== 200) {
        // Never answered, as in the simulation: a refusal must not flatter the percentiles.
        errors++;
        ttft.push(Infinity);
        return;
      }
      ttft.push((reply.firstAt - started) * timeScale);
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
    return {
      policy,
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
  const reply = await gateway.handle(
    { path: '/v1/chat/completions', body, headers: { 'content-type': 'application/json' } },
    (chunk) => {
      if (!firstAt && /"content":"[^"]/.test(chunk)) firstAt = Date.now();
    },
  );
  return { status: reply.status, firstAt: firstAt || Date.now() };
}
