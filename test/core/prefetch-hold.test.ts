/**
 * A prefetch never takes the room a request held in the gateway waits for. Real parts: a
 * FleetRuntime and RouterService as in the plugin server (memory store, the poller's timer driving
 * the prefetch ticks), the HTTP replica simulator on loopback, whose own log says what was loaded
 * and unloaded.
 */
import { CoreHarness, sendVia } from '../helpers/core-harness';
import { templatedRouter } from '../helpers/replicas';

const BASE = 'meta-llama/Llama-3.1-8B-Instruct';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let h: CoreHarness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

it('a request held for the queue keeps the free slot: no prefetch takes it (or evicts for it) meanwhile', async () => {
  // One replica, one adapter slot, free. A long prompt (base model, no slot) runs on it: the
  // router predicts ~10 s of prefill ahead of anything else (2,000 tokens a second assumed), past
  // the 1 s objective, so a request for `x` is held in the gateway until it ends (~2 s here).
  h = await CoreHarness.start([{ adapterDirs: ['/adapters'], timeScale: 1, maxModelLen: 32768 }], (urls) =>
    templatedRouter(urls, BASE, {
      prefill_tokens_per_second: 2000,
      ttft_slo_ms: 1000,
      queue_timeout_ms: 20_000,
      max_loaded_adapters: 1,
      prefetch: true,
      prefetch_interval_ms: 500,
      prefetch_hysteresis: 0.5,
    }),
  );
  const replica = h.fleet.replicas[0]!;
  await h.nextPoll();
  const long = sendVia(h.router, '/v1/completions', {
    model: BASE,
    prompt: 'a'.repeat(80_000),
    max_tokens: 10,
  });
  const end = Date.now() + 5000;
  while (replica.engine.stats().running === 0 && Date.now() < end) await sleep(10);
  const holds = async () => (await h!.rt.metrics.ttftHolds.get()).values[0]?.value ?? 0;
  const x = h.chat('x', 2);
  // Held while the long prompt runs (~2 s).
  const held = Date.now() + 5000;
  while ((await holds()) === 0 && Date.now() < held) await sleep(10);
  expect(await holds()).toBe(1);
  // Then `hot` turns out to have been asked for a while ago, five times: the free slot is its
  // target (5 of 6 requests), and several prefetch ticks come while `x` is held.
  const now = h.rt.clock.now();
  for (let i = 0; i < 5; i++)
    h.rt.prefetcher.observe({ name: 'hot', path: '/adapters/hot' }, h.fleet.urls, now - 1000);
  expect((await x).status).toBe(200);
  const log = replica.adapterLog().map((e) => `${e.op} ${e.name}`);
  expect((await long).status).toBe(200);
  // The slot stayed the held request's: its load needed no unload, and no prefetch came first.
  expect(log).toEqual(['load x']);
  // Its want of room ended with it.
  expect(h.rt.manager.roomWants.size).toBe(0);
}, 20_000);
