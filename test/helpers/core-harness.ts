import { parseRouterConfig } from '../../src/config/parse';
import { silentLogger } from '../../src/log';
import { RouterService, type RouteOutcome } from '../../src/router/router';
import { FleetRuntime } from '../../src/runtime';
import { SimFleet } from '../../sim/fleet';
import type { ReplicaOptions } from '../../sim/http/replica';

/**
 * Routes one request with `router`, proxies it to the chosen replica as Kong would and releases
 * its lease with the replica's status, as the log phase does (502 when the replica could not
 * be reached). The replica's body as text; a refusal's outcome carries its own.
 */
export async function sendVia(
  router: RouterService,
  path: string,
  body: unknown,
): Promise<{ outcome: RouteOutcome; status: number; text: string }> {
  const raw = JSON.stringify(body);
  const outcome = await router.route({ path, body: Buffer.from(raw) });
  if (outcome.kind === 'respond') return { outcome, status: outcome.status, text: '' };
  let answer: { status: number; text: string };
  try {
    const res = await fetch(`${outcome.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: outcome.body ?? raw,
      signal: AbortSignal.timeout(20000),
    });
    answer = { status: res.status, text: await res.text() };
  } catch (err) {
    await router.finish(outcome.leaseId, 502);
    throw err;
  }
  // Once, outside the catch: a release that throws must not be followed by a second.
  await router.finish(outcome.leaseId, answer.status);
  return { outcome, ...answer };
}

/**
 * The routing core with simulated replicas on loopback: decide with RouterService, send the
 * request to the chosen target over HTTP, then release as the log phase would.
 */
export class CoreHarness {
  private constructor(
    readonly fleet: SimFleet,
    readonly rt: FleetRuntime,
    readonly router: RouterService,
  ) {}

  static async start(
    specs: ReplicaOptions[],
    config: (urls: string[]) => Record<string, unknown>,
    pollMs = 50,
  ): Promise<CoreHarness> {
    const fleet = await SimFleet.start(specs);
    const rt = new FleetRuntime({
      log: silentLogger,
      seed: 1,
      poller: { intervalMs: pollMs, timeoutMs: 500 },
    });
    const router = new RouterService(parseRouterConfig(config(fleet.urls)), rt);
    return new CoreHarness(fleet, rt, router);
  }

  /** Routes and proxies one request; returns the router outcome and the replica's answer. */
  async send(path: string, body: unknown): Promise<{ outcome: RouteOutcome; status: number; json: any }> {
    const r = await sendVia(this.router, path, body);
    if (r.outcome.kind === 'respond') return { outcome: r.outcome, status: r.status, json: r.outcome.body };
    return { outcome: r.outcome, status: r.status, json: r.text ? JSON.parse(r.text) : null };
  }

  chat(model: string, maxTokens = 2, extra: Record<string, unknown> = {}) {
    return this.send('/v1/chat/completions', {
      model,
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: maxTokens,
      ...extra,
    });
  }

  loads(i: number, name?: string) {
    return this.fleet.replicas[i]!.adapterLog().filter(
      (e) => e.op === 'load' && (name === undefined || e.name === name),
    );
  }

  unloads(i: number) {
    return this.fleet.replicas[i]!.adapterLog().filter((e) => e.op === 'unload');
  }

  /** Waits for the poller to have polled every replica once more. */
  async nextPoll(): Promise<void> {
    const before = this.rt.poller.stats.polls;
    const n = this.fleet.replicas.length;
    const end = Date.now() + 5000;
    while (this.rt.poller.stats.polls < before + n * 2) {
      if (Date.now() > end) throw new Error('no poll within 5 s');
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  async stop(): Promise<void> {
    this.rt.stop();
    await this.fleet.stop();
  }
}
