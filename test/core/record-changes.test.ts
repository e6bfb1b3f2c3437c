/**
 * A request whose decision spans `redis` record changes, through RouterService against a
 * simulated vLLM replica (real HTTP on loopback) and a real redis-server. The replica's answers
 * are gated by the test (`GatedApi`), so each step happens in the order written, not by timing.
 */
import { HttpReplicaApi } from '../../src/backends/http-replica-api';
import type { LoadOutcome, ReplicaApi, Scrape } from '../../src/backends/replica-api';
import { VirtualClock } from '../../src/clock';
import { parseRouterConfig } from '../../src/config/parse';
import type { RedisConfig } from '../../src/config/redis-schema';
import type { ReplicaSpec } from '../../src/fleet/types';
import { RouterService, type RouteOutcome } from '../../src/router/router';
import type { FleetRuntime } from '../../src/runtime';
import { SimFleet } from '../../sim/fleet';
import { redisRuntimes } from '../helpers/runtime-harness';
import { waitFor } from '../helpers/wait';

const BASE = 'meta-llama/Llama-3.1-8B-Instruct';
const h = redisRuntimes('rc');

/** A gate the test opens: calls wait on it until then. */
class Gate {
  private opened!: () => void;
  readonly open = new Promise<void>((r) => (this.opened = r));
  release(): void {
    this.opened();
  }
}

/** Loads asked of the replica, held until the test lets them go (shared by every runtime's client). */
const loads = { gate: new Gate(), asked: 0 };

/** The real HTTP client of one runtime, with its scrapes held until the test lets them go. */
class GatedApi implements ReplicaApi {
  private readonly http = new HttpReplicaApi();
  readonly scrapes = new Gate();
  scrapesAsked = 0;

  async scrape(replica: ReplicaSpec, timeoutMs: number): Promise<Scrape> {
    this.scrapesAsked++;
    await this.scrapes.open;
    return this.http.scrape(replica, timeoutMs);
  }
  async loadAdapter(url: string, name: string, path: string, timeoutMs: number): Promise<LoadOutcome> {
    loads.asked++;
    await loads.gate.open;
    return this.http.loadAdapter(url, name, path, timeoutMs);
  }
  unloadAdapter(url: string, name: string, timeoutMs: number) {
    return this.http.unloadAdapter(url, name, timeoutMs);
  }
  activity(url: string, timeoutMs: number) {
    return this.http.activity(url, timeoutMs);
  }
  residency(url: string, timeoutMs: number) {
    return this.http.residency(url, timeoutMs);
  }
}

describe('a request whose decision spans two `redis` record changes', () => {
  let fleet: SimFleet | undefined;
  afterEach(async () => {
    await fleet?.stop();
    fleet = undefined;
  });

  it('leaves no lease open in any state when its slow load fails after the second change', async () => {
    fleet = await SimFleet.start([{ adapterDirs: ['/adapters'], timeScale: 20 }]);
    const url = fleet.urls[0]!;
    const [pa, pb, pc] = [h.prefix(), h.prefix(), h.prefix()];
    const record = (p: string): RedisConfig => h.redis.config(p, { timeout: 2000 });
    const configure = (p: string, api: GatedApi): { rt: FleetRuntime; router: RouterService } => {
      const rt = h.runtime({ redis: record(p), api, seed: 1, clock });
      const config = parseRouterConfig({
        replicas: [{ url }],
        base_model: BASE,
        adapter_path_template: '/adapters/{name}',
        max_loaded_adapters: 2,
        redis: record(p),
      });
      return { rt, router: new RouterService(config, rt) };
    };
    // Time stands still unless the test moves it: no poll, probe or timer fires on its own.
    const clock = new VirtualClock();
    const fresh = async (rt: FleetRuntime) => (await rt.store.views([url]))[0]?.health === 'up';
    const apiA = new GatedApi();
    const a = configure(pa, apiA);
    // The request starts on A and waits there, for the replica's first scrape (no fresh view yet).
    const body = Buffer.from(JSON.stringify({ model: 'x', prompt: 'hi', max_tokens: 1 }));
    let outcome: RouteOutcome | undefined;
    const routed = a.router.route({ path: '/v1/completions', body }).then((o) => (outcome = o));
    await waitFor(() => apiA.scrapesAsked > 0, 10_000, 'the scrape on A');
    // The record changes A -> B while it waits; B polls the replica.
    const apiB = new GatedApi();
    apiB.scrapes.release();
    const b = configure(pb, apiB);
    const aRetired = a.rt.retire(b.rt);
    await (b.router as unknown as { ready: Promise<void> }).ready;
    await b.rt.poller.refreshUrl(url);
    expect(await fresh(b.rt)).toBe(true);
    apiA.scrapes.release();
    // It takes its lease and starts its load, which the replica holds.
    await waitFor(() => loads.asked === 1 || outcome !== undefined, 10_000, 'the load asked of the replica');
    expect(outcome).toBeUndefined();
    // The record changes B -> C during the load.
    const apiC = new GatedApi();
    apiC.scrapes.release();
    const c = configure(pc, apiC);
    await b.rt.retire(c.rt);
    // The load fails: the replica answers 500.
    await fleet.replicas[0]!.fault({ kind: 'failLoads', count: 1 });
    loads.gate.release();
    await routed;
    expect(outcome).toMatchObject({ kind: 'respond', status: 502 });
    await aRetired;
    // Its lease is given back: open in no state the node used (before: open in C's until
    // lease_max_age_ms, where nothing would release it).
    expect({ a: await h.openIn(pa), b: await h.openIn(pb), c: await h.openIn(pc) }).toEqual({
      a: [],
      b: [],
      c: [],
    });
  }, 30_000);
});
