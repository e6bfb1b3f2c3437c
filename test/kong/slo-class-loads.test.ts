/**
 * The hold for a lower class's adapter load (src/router/room-wait.ts `stallsHigher`) through the
 * real plugin server and a simulated vLLM replica whose loads take 1 s of real time: a batch
 * request for a cold adapter, decided while an interactive request waits for its own load there,
 * waits in the gateway until that request has its first token, so the batch load does not stop
 * the engine under it.
 */
import type { KongDriver } from '../../harness/kong/driver';
import { chatBody, onDemand, startWorld, usePluginServer, vllm } from './world';

let driver: KongDriver;
usePluginServer((_s, d) => {
  driver = d;
});

describe('a batch load waits for the interactive first tokens it would stall, through the plugin server', () => {
  let w: Awaited<ReturnType<typeof startWorld>> | undefined;
  afterEach(async () => {
    await w?.stop();
    w = undefined;
  });

  it('the interactive request gets its first token before the batch load runs; the batch one is held, then served', async () => {
    w = await startWorld(driver, [vllm({ timeScale: 1 })], (u) =>
      onDemand(u, {
        slo_classes: [
          { name: 'interactive', ttft_ms: 2000, priority: 0 },
          { name: 'batch', ttft_ms: 30000, priority: -1 },
        ],
        default_slo_class: 'interactive',
      }),
    );
    const send = (model: string, headers: Record<string, string> = {}) =>
      w!.service.handle({
        path: '/v1/chat/completions',
        headers: { 'content-type': 'application/json', ...headers },
        body: chatBody(model, 10, 2),
      });
    const holds = async () =>
      Number(
        /^lora_router_ttft_holds_total (\d+)$/m.exec(
          (await w!.status.handle({ method: 'GET', path: '/lora/metrics' })).body.toString(),
        )?.[1] ?? 0,
      );
    const replica = w.fleet.replicas[0]!;
    const holds0 = await holds();
    // An interactive request for a cold adapter: its load takes 1 s.
    const interactive = send('sql');
    await new Promise((r) => setTimeout(r, 300));
    // A batch request for another cold adapter, while the interactive one waits for its load.
    const batch = send('chat', { 'x-gateway-inference-objective': 'batch' });
    const [i, b] = await Promise.all([interactive, batch]);
    expect(i.status).toBe(200);
    expect(b.status).toBe(200);
    const records = replica.requestRecords();
    const ri = records.find((r) => r.adapter === 'sql')!;
    const rb = records.find((r) => r.adapter === 'chat')!;
    // Its first token came right after its own load, not after another second of the batch load.
    expect(ri.firstToken! - ri.arrival).toBeLessThan(500);
    // The batch request reached the replica after its load, begun once the interactive one started.
    expect(rb.arrival).toBeGreaterThan(ri.firstToken!);
    expect((await holds()) - holds0).toBeGreaterThanOrEqual(1);
    expect((await w.statusJson()).inFlight).toBe(0);
  });
});
