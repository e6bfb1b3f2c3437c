/**
 * `max_in_flight` through the real plugin server and a simulated vLLM replica: a request of a
 * class bounded by it joins the replica only while fewer than that many of the router's requests are
 * in flight there (so never more than that many with it) (leases taken in the access phase, given back in the log phase), waiting in the
 * gateway meanwhile, also when two of its class come at once at the bound; once the log phases have given every
 * lease back, one goes at once.
 */
import type { KongDriver } from '../../harness/kong/driver';
import { waitFor } from '../../harness/wait';
import type { RequestRecord } from '../../sim/engine/engine';
import type { GatewayReply } from '../../stack/gateway';
import { BASE, chatBody, onDemand, startWorld, usePluginServer, vllm } from './world';

let driver: KongDriver;
usePluginServer((_s, d) => {
  driver = d;
});

const MAX_IN_FLIGHT = 3;

/** Requests the replica ran when `b` reached it (came before it and not yet ended). */
const alongside = (records: RequestRecord[], b: RequestRecord) =>
  records.filter((o) => o !== b && o.arrival <= b.arrival && (o.end ?? Infinity) > b.arrival).length;

describe('max_in_flight, through the plugin server', () => {
  let w: Awaited<ReturnType<typeof startWorld>> | undefined;
  afterEach(async () => {
    await w?.stop();
    w = undefined;
  });

  it('holds a bounded class while max_in_flight of the router’s requests are in flight on the replica, until log phases give leases back; none left behind', async () => {
    // Real time; 16 sequences at once, so nothing queues and no TTFT hold: only the bound holds.
    // A 100-token answer takes about 2 s of 20 ms decode steps.
    w = await startWorld(driver, [vllm({ timeScale: 1, engine: { maxNumSeqs: 16 } })], (u) =>
      onDemand(u, {
        slo_classes: [
          { name: 'interactive', ttft_ms: 2000, priority: 0 },
          // Held for a free place for up to half its objective: 15 s, far past the long answers.
          { name: 'batch', ttft_ms: 30000, priority: -1, max_in_flight: MAX_IN_FLIGHT },
        ],
        default_slo_class: 'interactive',
      }),
    );
    const send = (maxTokens: number, headers: Record<string, string> = {}) =>
      w!.service.handle({
        path: '/v1/chat/completions',
        headers: { 'content-type': 'application/json', ...headers },
        body: chatBody(BASE, 10, maxTokens),
      });
    const batch = (maxTokens = 2) => send(maxTokens, { 'x-gateway-inference-objective': 'batch' });
    const holds = async () =>
      Number(
        /^lora_router_ttft_holds_total (\d+)$/m.exec(
          (await w!.status.handle({ method: 'GET', path: '/lora/metrics' })).body.toString(),
        )?.[1] ?? 0,
      );
    const replica = w.fleet.replicas[0]!;
    // The router has seen the replica.
    expect((await send(2)).status).toBe(200);
    const before = replica.requestRecords().length;
    // Held requests so far. A batch request may also be held by its gate now and then (the
    // prediction past the interactive objective once a scrape sees the long answers), and the
    // first at the bound then with the second: the counts below are at least the bound's holds.
    const holds0 = await holds();

    // Three interactive requests (no bound) in flight, then two batch requests at once.
    const long: Promise<GatewayReply>[] = [send(100), send(100), send(100)];
    await waitFor(() => replica.engine.stats().running === 3);
    const held = [batch(), batch()];
    for (const r of await Promise.all([...long, ...held])) expect(r.status).toBe(200);

    // Each batch request reached the replica while at most MAX_IN_FLIGHT - 1 others ran there (the
    // router counts a request from its access phase to its log phase, longer than the replica
    // runs it): it waited for the log phases of the long ones, and for the other batch request.
    const records = replica.requestRecords().slice(before);
    expect(records).toHaveLength(5);
    const shortOnes = records.filter((r) => r.outputTokens < 100);
    expect(shortOnes).toHaveLength(2);
    for (const b of shortOnes) expect(alongside(records, b)).toBeLessThanOrEqual(MAX_IN_FLIGHT - 1);
    // Both waited in the gateway.
    const holds1 = await holds();
    expect(holds1 - holds0).toBeGreaterThanOrEqual(2);

    // One short of the bound (two in flight), two batch requests at once: each sees two in flight, yet only
    // one may join; the other waits for a log phase. Long enough (60 tokens, about 1.2 s) that the
    // first still runs when the second is decided, however loaded the machine.
    const atBound = replica.requestRecords().length;
    const two: Promise<GatewayReply>[] = [send(100), send(100)];
    await waitFor(() => replica.engine.stats().running === 2);
    const pair = [batch(60), batch(60)];
    for (const r of await Promise.all([...two, ...pair])) expect(r.status).toBe(200);
    const second = replica.requestRecords().slice(atBound);
    expect(second).toHaveLength(4);
    for (const b of second.filter((r) => r.outputTokens === 60))
      expect(alongside(second, b)).toBeLessThanOrEqual(MAX_IN_FLIGHT - 1);
    const holds2 = await holds();
    expect(holds2 - holds1).toBeGreaterThanOrEqual(1);

    // Every lease given back in the log phase: nothing in flight, and a batch request goes at once.
    const status = await w.statusJson();
    expect(status.inFlight).toBe(0);
    expect(status.replicas.find((r: { url: string }) => r.url === w!.fleet.urls[0]).inFlight).toBe(0);
    const inFlightMetric = (await w.status.handle({ method: 'GET', path: '/lora/metrics' })).body.toString();
    expect(inFlightMetric).toContain(`lora_router_in_flight{replica="${w.fleet.urls[0]}"} 0\n`);
    expect((await batch()).status).toBe(200);
    expect(await holds()).toBe(holds2);
  });
});
