import { LocalGateway } from '../../stack/gateway';
import { waitFor } from '../../harness/wait';
import type { KongDriver } from '../../harness/kong/driver';
import { BASE, chatBody, onDemand, startWorld, usePluginServer, vllm } from './world';

let driver: KongDriver;
usePluginServer((_s, d) => {
  driver = d;
});

describe('saturation_mode predicted, through the plugin server and simulated vLLM replicas', () => {
  let w: Awaited<ReturnType<typeof startWorld>> | undefined;
  let count: LocalGateway | undefined;
  afterEach(async () => {
    await count?.close();
    await w?.stop();
    count = w = undefined;
  });

  it('sends a request to an idle non-holder with a load when the holder has two long prompts waiting', async () => {
    // One sequence a replica, time 10x: a 100 ms load, and prefill at 100k tokens a second.
    const replica = () =>
      vllm({ maxModelLen: 200_000, engine: { maxNumSeqs: 1, kvCapacityTokens: 1_000_000 } });
    const common = {
      max_loaded_adapters: 2,
      target_waiting_per_replica: 4,
      picker: 'max-score',
      decision_headers: true,
      prefill_tokens_per_second: 20_000,
    };
    w = await startWorld(driver, [replica(), replica()], (u) =>
      onDemand(u, { ...common, saturation_mode: 'predicted' }),
    );
    // The same replicas behind a route with the count rule: in the same plugin server it shares
    // the fleet's runtime (and work model), as two routes on one Kong node do.
    count = await LocalGateway.create({
      driver,
      plugins: [
        { name: 'lora-router', config: onDemand(w.fleet.urls, { ...common, saturation_mode: 'count' }) },
      ],
      serviceUrl: w.fleet.urls[0]!,
    });
    const send = (gw: LocalGateway, tokens: number, maxTokens: number) =>
      gw.handle({
        path: '/v1/chat/completions',
        headers: { 'content-type': 'application/json' },
        body: chatBody('hot', tokens, maxTokens),
      });

    const first = await w.chat('hot');
    const holder = first.headers['X-Lora-Replica'] as string;
    const hi = w.fleet.urls.indexOf(holder);
    const other = 1 - hi;
    expect(w.loads(hi, 'hot')).toHaveLength(1);
    // Through the count route: a long decode takes the holder's one sequence, then two
    // 50k-token prompts queue behind it (fewer than 4 waiting: the count rule keeps them on the holder).
    const jam = [send(count, 10, 2000)];
    await waitFor(() => w!.fleet.replicas[hi]!.engine.stats().running === 1);
    jam.push(send(count, 50_000, 10), send(count, 50_000, 10));
    await waitFor(() => w!.fleet.replicas[hi]!.engine.stats().waiting === 2);
    expect(w.fleet.replicas[other]!.engine.stats()).toMatchObject({ running: 0, waiting: 0 });

    // The count rule keeps a new request on the holder: two waiting is not saturated.
    const byCount = send(count, 1000, 5);
    await waitFor(() => w!.fleet.replicas[hi]!.engine.stats().waiting === 3);
    // Predicted: about 5 s of prefill ahead on the holder against a 0.1 s load on the idle one.
    const r = await send(w.service, 1000, 5);
    expect(r.status).toBe(200);
    expect([r.headers['X-Lora-Replica'], r.headers['X-Lora-Stage']]).toEqual([w.fleet.urls[other], 'free']);
    expect(w.loads(other, 'hot')).toHaveLength(1);
    const c = await byCount;
    expect([c.status, c.headers['X-Lora-Replica'], c.headers['X-Lora-Stage']]).toEqual([
      200,
      holder,
      'holder',
    ]);
    await Promise.all(jam);
  });
});

describe('ttft_slo_ms on an idle fleet, through the plugin server and a simulated vLLM replica', () => {
  let w: Awaited<ReturnType<typeof startWorld>> | undefined;
  afterEach(async () => {
    await w?.stop();
    w = undefined;
  });

  it('a cold request whose load alone takes the objective is not held: its load cannot start while it waits', async () => {
    // Loads of 10 s modelled, 1 s of real time; the router's prior (1 s) and then what it learns
    // are past a 500 ms objective. The hold window would be 11.5 s (queue_timeout_ms - ttft_slo_ms).
    w = await startWorld(driver, [vllm({ engine: { loadBaseMs: 10_000 } })], (u) =>
      onDemand(u, { ttft_slo_ms: 500, queue_timeout_ms: 12_000 }),
    );
    const holdWindowMs = 12_000 - 500;
    for (const adapter of ['a', 'b']) {
      const sent = Date.now();
      const r = await w.chat(adapter);
      expect(r.status).toBe(200);
      // Answered before a hold would have ended: nothing queued, so nothing to wait for.
      expect(Date.now() - sent).toBeLessThan(holdWindowMs);
      expect(w.loads(0, adapter)).toHaveLength(1);
    }
    const metrics = (await w.status.handle({ method: 'GET', path: '/lora/metrics' })).body.toString();
    expect(metrics).toMatch(/^lora_router_ttft_holds_total 0$/m);
  });
});

describe('requests longer than every replica context', () => {
  let w: Awaited<ReturnType<typeof startWorld>> | undefined;
  afterEach(async () => {
    await w?.stop();
    w = undefined;
  });

  it('are refused up front with a 400 context_length_exceeded, and no replica sees them', async () => {
    w = await startWorld(driver, [vllm({ maxModelLen: 8192 }), vllm({ maxModelLen: 4096 })], (u) =>
      onDemand(u),
    );
    const ask = (tokens: number, maxTokens: number) =>
      w!.service.handle({
        path: '/v1/chat/completions',
        headers: { 'content-type': 'application/json' },
        body: chatBody(BASE, tokens, maxTokens),
      });
    const r = await ask(8000, 500);
    expect(r.status).toBe(400);
    const body = JSON.parse(r.body.toString()) as { error: { code: string; type: string; message: string } };
    expect(body.error).toMatchObject({ code: 'context_length_exceeded', type: 'invalid_request_error' });
    expect(body.error.message).toMatch(
      /^This model's maximum context length is 8192 tokens\. However, you requested about \d+ tokens \(\d+ in the messages, 500 in the completion\)/,
    );
    for (const replica of w.fleet.replicas) expect(replica.engine.stats().promptTokensTotal).toBe(0);
    // One that fits only the larger replica goes there, every time.
    for (let i = 0; i < 4; i++) expect((await ask(6000, 500)).status).toBe(200);
    // One that fits both is served.
    expect((await ask(3000, 500)).status).toBe(200);
  });
});
