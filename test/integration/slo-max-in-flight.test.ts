/**
 * `max_in_flight` (src/router/room-wait.ts `holdsNow`) through RouterService against a simulated
 * vLLM replica: a request of a bounded class joins a replica only while fewer than that many of the
 * router's requests are in flight there, also when several such requests are decided at once.
 */
import { CoreHarness } from '../helpers/core-harness';
import { templatedRouter } from '../helpers/replicas';
import { inFlightHere } from '../../src/router/in-flight-here';
import type { RouteOutcome } from '../../src/router/router';
import { heldOn } from '../../src/router/slo-class';

const BASE = 'meta-llama/Llama-3.1-8B-Instruct';

describe('max_in_flight, through RouterService', () => {
  let h: CoreHarness | undefined;
  afterEach(async () => {
    await h?.stop();
    h = undefined;
  });

  const start = () =>
    CoreHarness.start([{ adapterDirs: ['/adapters'], timeScale: 1 }], (urls) =>
      templatedRouter(urls, BASE, {
        slo_classes: [
          { name: 'interactive', ttft_ms: 2000, priority: 0 },
          // Held for a replica with a free place for up to half its objective: 2 s.
          { name: 'batch', ttft_ms: 4000, priority: -1, max_in_flight: 2 },
        ],
        default_slo_class: 'interactive',
      }),
    );
  const route = (objective?: string) =>
    h!.router.route({
      path: '/v1/completions',
      body: Buffer.from(JSON.stringify({ model: BASE, prompt: 'hi', max_tokens: 5 })),
      slo: async () => (objective ? { objective } : {}),
    });
  /** The router's requests in flight on the only replica (its leases). */
  const inFlight = async () => (await h!.rt.store.views(h!.fleet.urls))[0]!.inFlight;
  const holds = async () => (await h!.rt.metrics.ttftHolds.get()).values[0]?.value ?? 0;
  const release = (o: RouteOutcome) => (o.kind === 'proxy' ? h!.router.finish(o.leaseId, 200) : undefined);

  it('lets one of two batch requests decided at once join a replica with one in flight, and holds the other', async () => {
    h = await start();
    await h.nextPoll();
    const first = await route('batch');
    expect(first.kind).toBe('proxy');
    expect(await inFlight()).toBe(1);
    // Both see one in flight (fewer than max_in_flight): only the first to join may.
    const seen: number[] = [];
    const pair = [route('batch'), route('batch')].map((p) =>
      p.then(async (o) => {
        seen.push(await inFlight());
        // Given back at once: the other, held, may then join a replica with one in flight.
        await release(o);
        return o;
      }),
    );
    const answers = await Promise.all(pair);
    for (const o of answers) expect(o.kind).toBe('proxy');
    // The second joined only once the first was given back: never three in flight.
    expect(seen).toEqual([2, 2]);
    expect(await holds()).toBe(1);
    await release(first);
    expect(await inFlight()).toBe(0);
    // Nothing left counted as joining the replica, nor as a lease open on it.
    expect(inFlightHere(h.rt, h.fleet.urls[0]!, 0, undefined)).toBe(0);
    // Nor as held in the gateway (the held batch request left the count when it went).
    expect(heldOn(h.rt, h.router.config).above(-1001)).toBe(false);
  });
});
