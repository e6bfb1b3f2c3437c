/**
 * Loads under way counted across router nodes: vLLM runs adapter loads one after another inside
 * its engine loop, so a load another node began on a replica delays a load there from this node
 * too. Two runtimes (two Kong nodes) share one store; node A's load is held by its replica API,
 * and node B decides cold adapters meanwhile (docs/routing.md, "Predicted TTFT").
 */
import type { LoadOutcome, ReplicaApi, Scrape } from '../../src/backends/replica-api';
import { VirtualClock } from '../../src/clock';
import { parseRouterConfig } from '../../src/config/parse';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import type { ReplicaSpec } from '../../src/fleet/types';
import { silentLogger } from '../../src/log';
import { RouterService } from '../../src/router/router';
import { FleetRuntime } from '../../src/runtime';

const R1 = 'http://10.0.0.1:8000';
const R2 = 'http://10.0.0.2:8000';

/** A replica API with idle replicas; its loads wait for the test when `hold` is set. */
class FakeApi implements ReplicaApi {
  readonly loadedOn: string[] = [];
  private readonly held: (() => void)[] = [];
  constructor(private readonly hold: boolean) {}

  async scrape(_r: ReplicaSpec): Promise<Scrape> {
    return {
      load: { running: 0, waiting: 0, kvUsage: 0.1, activeAdapters: [], malformedLines: 0 },
      registry: [],
    };
  }
  async loadAdapter(url: string): Promise<LoadOutcome> {
    this.loadedOn.push(url);
    if (this.hold) await new Promise<void>((r) => this.held.push(r));
    return 'loaded';
  }
  async unloadAdapter(): Promise<'unloaded'> {
    return 'unloaded';
  }
  release(): void {
    for (const r of this.held.splice(0)) r();
  }
}

function node(store: MemoryFleetStore, clock: VirtualClock, api: FakeApi, seed: number, urls: string[]) {
  const rt = new FleetRuntime({ log: silentLogger, store, api, clock, seed });
  const router = new RouterService(
    parseRouterConfig({
      replicas: urls.map((url) => ({ url })),
      base_model: 'base',
      adapter_path_template: '/adapters/{name}',
      saturation_mode: 'predicted',
      max_loaded_adapters: 16,
    }),
    rt,
  );
  return { rt, router };
}

const completion = (model: string) => Buffer.from(JSON.stringify({ model, prompt: 'hi', max_tokens: 1 }));

describe('loads under way begun by another node', () => {
  const stops: (() => void)[] = [];
  afterEach(() => {
    for (const s of stops.splice(0)) s();
  });

  /**
   * Node A's cold load held on R1 (a slow load under way), node C's two base-model requests in
   * flight on R2 (by in-flight counts R1 is the quieter), and node B, routing to both with
   * `seed`: where B sends a cold adapter's request, whose load would wait behind A's on R1.
   */
  async function coldPickOfB(seed: number): Promise<string> {
    const store = new MemoryFleetStore();
    // Time stands still: A's load is as long under way as when B decides.
    const clock = new VirtualClock();
    const apiA = new FakeApi(true);
    const a = node(store, clock, apiA, seed, [R1]);
    const b = node(store, clock, new FakeApi(false), seed, [R1, R2]);
    const c = node(store, clock, new FakeApi(false), seed, [R2]);
    stops.push(
      () => a.rt.stop(),
      () => b.rt.stop(),
      () => c.rt.stop(),
    );
    for (const url of [R1, R2]) await b.rt.poller.refreshUrl(url);
    for (let i = 0; i < 2; i++)
      expect(await c.router.route({ path: '/v1/completions', body: completion('base') })).toMatchObject({
        kind: 'proxy',
        url: R2,
      });
    const routedA = a.router.route({ path: '/v1/completions', body: completion('x') });
    for (let i = 0; i < 100 && apiA.loadedOn.length === 0; i++) await new Promise((r) => setImmediate(r));
    expect(apiA.loadedOn).toEqual([R1]);
    expect((await store.views([R1], { name: 'x' }))[0]!.adapter?.state).toBe('loading');
    const o = await b.router.route({ path: '/v1/completions', body: completion('y') });
    if (o.kind !== 'proxy') throw new Error(`y: ${JSON.stringify(o)}`);
    await b.router.finish(o.leaseId, 200);
    apiA.release();
    await routedA;
    return o.url;
  }

  it("a node places a cold adapter away from the replica where another node's load is under way", async () => {
    const picks: string[] = [];
    for (let seed = 1; seed <= 4; seed++) picks.push(await coldPickOfB(seed));
    // Before: R1 each time (as quiet as R2 by the prediction, quieter by in-flight counts).
    expect(picks).toEqual([R2, R2, R2, R2]);
  });
});
