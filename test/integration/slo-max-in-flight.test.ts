/**
 * `max_in_flight` (src/router/room-wait.ts `holdsNow`) through RouterService against a simulated
 * vLLM replica: a request of a bounded class joins a replica only while fewer than that many of the
 * router's requests are in flight there, also when several such requests are decided at once.
 */
import { CoreHarness } from '../helpers/core-harness';
import { templatedRouter } from '../helpers/replicas';
import * as inFlightModule from '../../src/router/in-flight-here';
import { inFlightHere } from '../../src/router/in-flight-here';
import { LeaseHandle } from '../../src/lease';
import type { RouteOutcome } from '../../src/router/router';
import { heldOn } from '../../src/router/slo-class';

const BASE = 'meta-llama/Llama-3.1-8B-Instruct';

describe('max_in_flight, through RouterService', () => {
  let h: CoreHarness | undefined;
  afterEach(async () => {
    jest.restoreAllMocks();
    await h?.stop();
    h = undefined;
  });

  const start = (batch = { ttft_ms: 4000, max_in_flight: 2 }) =>
    CoreHarness.start([{ adapterDirs: ['/adapters'], timeScale: 1 }], (urls) =>
      templatedRouter(urls, BASE, {
        slo_classes: [
          { name: 'interactive', ttft_ms: 2000, priority: 0 },
          // Held for a replica with a free place for up to half its objective: 2 s.
          { name: 'batch', priority: -1, ...batch },
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

  // With a shared store the request's lease is taken with the views on its adapter's last replica
  // (router.ts, the guessed lease). Held at the bound, it reads the views again once a request ends:
  // those show its own lease. Counted against it, the request judged itself one of the bound's and
  // waited up to half its objective on a replica where it is alone (max_in_flight 1).
  it("does not count a held request's own guessed lease against it once the views show it", async () => {
    // Half of this objective is far past the test's timeout: a request held to its end fails it.
    h = await start({ ttft_ms: 600_000, max_in_flight: 1 });
    // The guessed lease is a shared store's (`redis`): the in-process store, read as one.
    (h.rt.store as { mode?: () => string }).mode = () => 'redis';
    await h.nextPoll();
    const first = await route('batch');
    expect(first.kind).toBe('proxy');
    const judged: number[] = [];
    const actual = inFlightModule.inFlightHere;
    jest.spyOn(inFlightModule, 'inFlightHere').mockImplementation((...args) => {
      const n = actual(...args);
      judged.push(n);
      return n;
    });
    const second = route('batch');
    second.catch((err: Error) => judged.push(-1, err.message as unknown as number));
    // Decided on the views read with its guessed lease: the first in flight, held at the bound.
    for (let i = 0; i < 1000 && judged.length < 1; i++) await new Promise((r) => setTimeout(r, 1));
    expect(judged).toEqual([1]);
    await release(first);
    // Decided again once the first is given back: alone there.
    for (let i = 0; i < 1000 && judged.length < 2; i++) await new Promise((r) => setTimeout(r, 1));
    expect(judged).toEqual([1, 0]);
    const o = await second;
    expect(o.kind).toBe('proxy');
    await release(o);
    expect(await inFlight()).toBe(0);
  });

  // Two requests decided at once each hold a guessed lease on the same replica. Held, a request
  // kept its guessed lease open: each counted the other's held lease as in flight, so with
  // max_in_flight 1 both waited up to half their objective on a replica with none in flight.
  it('lets one of two batch requests with guessed leases on an idle replica go: a held one gives its lease back', async () => {
    h = await start({ ttft_ms: 600_000, max_in_flight: 1 });
    (h.rt.store as { mode?: () => string }).mode = () => 'redis';
    await h.nextPoll();
    // The replica becomes the base model's last: both next requests take their lease there first.
    await release(await route('batch'));
    expect(await inFlight()).toBe(0);
    const outcomes: RouteOutcome[] = [];
    const pair = [route('batch'), route('batch')].map((p) => p.then((o) => (outcomes.push(o), o)));
    // Each first sees the other's guessed lease (it may yet join): held, it gives its own back, and
    // on the next look (a room change, or the 250 ms fallback) one goes and the other stays held.
    for (let i = 0; i < 2000 && outcomes.length < 1; i++) await new Promise((r) => setTimeout(r, 1));
    expect(outcomes.map((o) => o.kind)).toEqual(['proxy']);
    expect(await inFlight()).toBe(1);
    await release(outcomes[0]!);
    const both = await Promise.all(pair);
    for (const o of both) expect(o.kind).toBe('proxy');
    await release(outcomes[1]!);
    expect(await inFlight()).toBe(0);
    expect(inFlightHere(h.rt, h.fleet.urls[0]!, 0, undefined)).toBe(0);
  });
});

/**
 * A decision on the replica of the request's own guessed lease (with a shared store, taken with
 * the views on its adapter's last replica): that lease is open there already, so the decision is
 * not counted as joining too. Counted twice while its placement claim was awaited, it made a
 * bounded class's request decided meanwhile see one more in flight than there was.
 */
describe('a decision on its own guessed lease’s replica, through RouterService', () => {
  let h: CoreHarness | undefined;
  afterEach(async () => {
    await h?.stop();
    h = undefined;
  });

  it('is counted once on that replica while its placement claim is awaited', async () => {
    h = await CoreHarness.start(
      [{ adapterDirs: ['/adapters'], timeScale: 10, engine: { loadBaseMs: 1000, maxLoras: 1 } }],
      (urls) => templatedRouter(urls, BASE, { max_loaded_adapters: 1 }),
    );
    const rt = h.rt;
    const url = h.fleet.urls[0]!;
    // The guessed lease is a shared store's (`redis`): the in-process store, read as one.
    (rt.store as { mode?: () => string }).mode = () => 'redis';
    await h.nextPoll();
    // `a` goes to the only replica (its last replica from now), then `b` takes its place.
    expect((await h.chat('a', 1)).status).toBe(200);
    expect((await h.chat('b', 1)).status).toBe(200);
    // `a` again: its lease is guessed there, and its cold decision claims the placement.
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    let claiming = 0;
    const claim = rt.store.claimPlacement.bind(rt.store);
    rt.store.claimPlacement = async (...args) => {
      claiming++;
      await gate;
      return claim(...args);
    };
    const again = h.chat('a', 1);
    for (let i = 0; i < 2000 && claiming === 0; i++) await new Promise((r) => setTimeout(r, 1));
    expect(claiming).toBe(1);
    expect(LeaseHandle.openOn(rt, url)).toBe(1);
    // One request of this process on its way there: one in flight as a bounded class judges it.
    expect(inFlightHere(rt, url, 0, undefined)).toBe(1);
    open();
    expect((await again).status).toBe(200);
    expect(inFlightHere(rt, url, 0, undefined)).toBe(0);
  });
});
