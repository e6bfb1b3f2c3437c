/**
 * The load backoff and the routing rule (docs/routing.md, "A load backing off"): a replica where
 * the adapter's load failed recently is not chosen for a load while another replica can take the
 * request without one; refused (503 `adapter_load_backoff`) only when every candidate would need
 * a load that is backing off. The routing core with the in-process store, simulated vLLM replicas
 * over loopback HTTP.
 */
import type { AdapterPolicy } from '../../src/adapters/manager';
import { CoreHarness } from '../helpers/core-harness';
import { templatedRouter } from '../helpers/replicas';

const BASE = 'meta-llama/Llama-3.1-8B-Instruct';
const vllm = () => ({ adapterDirs: ['/adapters'], timeScale: 10, engine: { loadBaseMs: 100, maxLoras: 1 } });

describe('a load backing off on one replica', () => {
  let h: CoreHarness;
  afterEach(() => h?.stop());

  /**
   * One slot each: `other` fills one replica (Y), so the other (X) is the only one with a free
   * slot, which the rule prefers. X fails the load of `x`: 502. Then X backs off `x`.
   */
  async function failedOnX(mode: 'count' | 'predicted') {
    h = await CoreHarness.start([vllm(), vllm()], (urls) =>
      templatedRouter(urls, BASE, {
        max_loaded_adapters: 1,
        saturation_mode: mode,
        backoff_base_ms: 60_000,
        queue_timeout_ms: 5_000,
      }),
    );
    expect((await h.chat('other')).status).toBe(200);
    const y = h.loads(0, 'other').length === 1 ? 0 : 1;
    const x = 1 - y;
    await h.fleet.replicas[x]!.fault({ kind: 'failLoads', count: 10 });
    const failed = await h.chat('x');
    expect([failed.status, failed.json.error?.code]).toEqual([502, 'adapter_load_failed']);
    expect(h.loads(x, 'x')).toHaveLength(1);
    return { x, y };
  }

  it.each(['count', 'predicted'] as const)(
    '(%s) the next request is served by another replica (its idle adapter unloaded), not refused',
    async (mode) => {
      const { x, y } = await failedOnX(mode);
      const next = await h.chat('x');
      expect({ status: next.status, code: next.json?.error?.code }).toEqual({ status: 200, code: undefined });
      expect(next.outcome).toMatchObject({ kind: 'proxy', url: h.fleet.urls[y] });
      // No second attempt on the replica backing off; one load on the other.
      expect(h.loads(x, 'x')).toHaveLength(1);
      expect(h.loads(y, 'x').map((e) => e.status)).toEqual([200]);
    },
  );

  it("another node's placement on the replica backing off is passed over, not followed into a 503", async () => {
    const { x, y } = await failedOnX('predicted');
    // Another router sharing the store (which has no backoff of its own) placed `x` on X.
    const X = h.fleet.urls[x]!;
    expect(await h.rt.store.claimPlacement('x', X, undefined, h.rt.clock.now(), 30_000, 'other-node')).toBe(
      X,
    );
    const next = await h.chat('x');
    expect({ status: next.status, code: next.json?.error?.code }).toEqual({ status: 200, code: undefined });
    expect(next.outcome).toMatchObject({ kind: 'proxy', url: h.fleet.urls[y] });
    expect(h.loads(x, 'x')).toHaveLength(1);
  });

  it('every candidate backing off: 503 adapter_load_backoff, Retry-After the soonest end among them', async () => {
    h = await CoreHarness.start([vllm(), vllm()], (urls) =>
      templatedRouter(urls, BASE, {
        max_loaded_adapters: 1,
        backoff_base_ms: 60_000,
        backoff_max_ms: 600_000,
      }),
    );
    for (const r of h.fleet.replicas) await r.fault({ kind: 'failLoads', count: 10 });
    // Each replica fails it once (the second request goes to the one not backing off yet).
    const first = await h.chat('x');
    expect(first.status).toBe(502);
    const second = await h.chat('x');
    expect(second.status).toBe(502);
    expect([h.loads(0, 'x').length, h.loads(1, 'x').length]).toEqual([1, 1]);
    const refused = await h.chat('x');
    expect(refused.status).toBe(503);
    expect(refused.json.error.code).toBe('adapter_load_backoff');
    expect(refused.outcome.kind === 'respond' && refused.outcome.headers['Retry-After']).toBe('60');
    expect([h.loads(0, 'x').length, h.loads(1, 'x').length]).toEqual([1, 1]);
  });

  // A name nobody had seen load, not found on X, is held off there and not routed around (the
  // unknown-name hold's case). Once it has loaded elsewhere it is known: X's hold is then a
  // replica missing it, which the scheduler must route around like any other failed load.
  it('a name not found on one replica, known since (loaded on another), is routed around that replica', async () => {
    h = await CoreHarness.start(
      [
        // X lacks `x` on its disk; Y has it.
        { adapterPaths: { '/adapters/other': 16 }, timeScale: 10, engine: { loadBaseMs: 100, maxLoras: 1 } },
        vllm(),
      ],
      (urls) => templatedRouter(urls, BASE, { max_loaded_adapters: 1, backoff_base_ms: 60_000 }),
    );
    const Y = h.fleet.urls[1]!;
    // The router's own policy, as its prefetcher loads with (src/prefetch/prefetcher.ts).
    const policy = (h.router as unknown as { adapterPolicy: AdapterPolicy }).adapterPolicy;
    const ref = (name: string) => ({ name, path: `/adapters/${name}` });
    expect(await h.rt.manager.ensure(Y, ref('other'), policy)).toBe('loaded');
    // X has the free slot the rule prefers: not found there.
    const missing = await h.chat('x');
    expect(missing.status).toBe(404);
    expect(h.loads(0, 'x')).toHaveLength(1);
    // `x` loads on Y (a prefetch, which plans no copy on X), then is evicted there for `other`.
    expect(await h.rt.manager.ensure(Y, ref('x'), policy)).toBe('loaded');
    expect(await h.rt.manager.ensure(Y, ref('other'), policy)).toBe('loaded');
    const next = await h.chat('x');
    expect({ status: next.status, code: next.json?.error?.code }).toEqual({ status: 200, code: undefined });
    expect(next.outcome).toMatchObject({ kind: 'proxy', url: Y });
    expect(h.loads(0, 'x')).toHaveLength(1);
  });
});
