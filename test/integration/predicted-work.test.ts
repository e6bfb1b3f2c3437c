/**
 * The router's context check and work model against simulated vLLM replicas (the review of
 * the predicted-TTFT work). The router decides; a decision is released as the log phase would.
 */
import { CoreHarness } from '../helpers/core-harness';
import { templatedRouter } from '../helpers/replicas';

const BASE = 'meta-llama/Llama-3.1-8B-Instruct';
const vllm = () => ({ adapterDirs: ['/adapters'], timeScale: 10, maxModelLen: 8192 });

describe('context check and work model, through RouterService', () => {
  let h: CoreHarness | undefined;
  afterEach(async () => {
    await h?.stop();
    h = undefined;
  });

  const route = (body: unknown) =>
    h!.router.route({ path: '/v1/completions', body: Buffer.from(JSON.stringify(body)) });

  it('checks a batch of completion prompts by its longest prompt, as vLLM checks each', async () => {
    h = await CoreHarness.start([vllm()], (urls) => templatedRouter(urls, BASE, {}));
    await h.nextPoll();
    // Three ~3k-token prompts: 9k in all, but each fits 8192 with its 100 completion tokens.
    const batch = await route({
      model: BASE,
      prompt: ['a'.repeat(12_000), 'b'.repeat(12_000), 'c'.repeat(12_000)],
      max_tokens: 100,
    });
    expect(batch.kind).toBe('proxy');
    if (batch.kind === 'proxy') await h.router.finish(batch.leaseId, 200);
    // One prompt past the context is still refused.
    const long = await route({ model: BASE, prompt: ['a'.repeat(33_000)], max_tokens: 100 });
    expect(long).toMatchObject({ kind: 'respond', status: 400 });
    expect(JSON.stringify(long)).toContain('context_length_exceeded');
  });

  it('count mode admits nothing to the work model; predicted mode (the default) does', async () => {
    for (const mode of ['count', 'predicted'] as const) {
      h = await CoreHarness.start([vllm()], (urls) => templatedRouter(urls, BASE, { saturation_mode: mode }));
      await h.nextPoll();
      const o = await route({ model: BASE, prompt: 'hello there', max_tokens: 10 });
      expect(o.kind).toBe('proxy');
      expect(h.rt.work.view(h.fleet.urls[0]!, h.rt.clock.now()).inFlight).toBe(mode === 'count' ? 0 : 1);
      if (o.kind === 'proxy') await h.router.finish(o.leaseId, 200);
      expect(h.rt.work.view(h.fleet.urls[0]!, h.rt.clock.now()).inFlight).toBe(0);
      await h.stop();
      h = undefined;
    }
  });
});
