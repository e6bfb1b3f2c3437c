/**
 * Issue 24, invariant (i): never an unload while the engine has the adapter's requests running
 * or waiting. The replica's word (a fresh `/metrics` read) says what ran when the replica wrote
 * it; a request routed by a node that does not see this one's unload (deciding alone after a
 * partition, or on a store just emptied) can reach the engine between that moment and the
 * unload. The router bounds that window: a word older than `ReplicaWord.freshMs` when the unload
 * would be sent is asked again, never trusted. Real parts: a FleetRuntime and RouterService as in
 * the plugin server, the HTTP replica simulator, whose own log the invariant reads.
 */
import { noBusyUnload, type ReplicaLogEntry } from '../../chaos/invariants';
import type { ReplicaApi } from '../../src/backends/replica-api';
import { parseRouterConfig } from '../../src/config/parse';
import { silentLogger } from '../../src/log';
import { RouterService } from '../../src/router/router';
import { FleetRuntime } from '../../src/runtime';
import { SimFleet } from '../../sim/fleet';
import { sendVia } from '../helpers/core-harness';
import { waitFor } from '../../harness/wait';

const BASE = 'meta-llama/Llama-3.1-8B-Instruct';

let fleet: SimFleet | undefined;
let rt: FleetRuntime | undefined;

afterEach(async () => {
  rt?.stop();
  rt = undefined;
  await fleet?.stop();
  fleet = undefined;
});

const logOf = (f: SimFleet): ReplicaLogEntry[] =>
  f.replicas.flatMap((r) => r.adapterLog().map((e) => ({ ...e, replica: r.url })));

const chatBody = (model: string, maxTokens: number) =>
  JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: maxTokens });

/** Sends a chat request straight to the replica (what a node deciding alone does); its status. */
async function direct(url: string, model: string, maxTokens: number): Promise<number> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: chatBody(model, maxTokens),
    signal: AbortSignal.timeout(20_000),
  });
  await res.text();
  return res.status;
}

/** Routes one chat request as Kong would and proxies it; the status answered. */
async function chat(router: RouterService, model: string, maxTokens: number): Promise<number> {
  return (await sendVia(router, '/v1/chat/completions', JSON.parse(chatBody(model, maxTokens)))).status;
}

/** One replica with one slot, a router polling it every 100 ms, and `a` loaded there, idle. */
async function oneSlotWithAIdle(queueTimeoutMs: number): Promise<{ url: string; router: RouterService }> {
  fleet = await SimFleet.start([{ adapterDirs: ['/adapters'], timeScale: 1, engine: { loadBaseMs: 50 } }]);
  const url = fleet.urls[0]!;
  rt = new FleetRuntime({ log: silentLogger, poller: { intervalMs: 100, timeoutMs: 2000 } });
  const router = new RouterService(
    parseRouterConfig({
      replicas: [{ url }],
      base_model: BASE,
      adapter_path_template: '/adapters/{name}',
      max_loaded_adapters: 1,
      queue_timeout_ms: queueTimeoutMs,
    }),
    rt,
  );
  await waitFor(() => rt!.poller.stats.polls > 1, 5000, 'first polls');
  expect(await chat(router, 'a', 1)).toBe(200);
  return { url, router };
}

describe('invariant (i): the replica’s word is fresh when the unload is sent', () => {
  it('a request that reaches the engine while the idle word travels back stops the unload', async () => {
    const { url, router } = await oneSlotWithAIdle(500);
    // The replica's answers take 300 ms to come back (a busy router process or network): the
    // word says what ran when the replica wrote it, 300 ms before the router reads it.
    await fleet!.replicas[0]!.fault({ kind: 'slowMetrics', ms: 300 });
    // 100 ms after the unload's fresh read was sent, another node's request for `a` arrives
    // (that node decides alone: it sees `a` loaded by its own poll, not this node's unload).
    const api = (rt!.manager.replicaWord as unknown as { api: ReplicaApi }).api;
    const activity = api.activity!.bind(api);
    let other: Promise<number> | undefined;
    api.activity = (u, t) => {
      other ??= new Promise<void>((r) => setTimeout(r, 100)).then(() => direct(url, 'a', 100));
      return activity(u, t);
    };
    const status = await chat(router, 'b', 1); // needs `a`'s slot
    await waitFor(() => other !== undefined, 5000, 'the unload asked the replica');
    expect(await other).toBe(200);
    const log = logOf(fleet!);
    expect(noBusyUnload(log).violations).toEqual([]);
    // `b` got the slot once `a`'s request ended, or a 503 to retry: never `a` unloaded under it.
    expect([200, 503]).toContain(status);
  }, 30_000);
});

describe('invariant (i): an adapter someone unseen routes is not unloaded between its requests', () => {
  // The 30-minute fault run at c170734 (seed 11) broke (i) twice this way: node 0, cut off from
  // Redis, routed `chaos-2` alone; node 2 found it busy with no lease (withheld), and 0.4 s later,
  // between two of node 0's requests, read it idle and unloaded it as the next one reached the engine.
  it('a busy report with no lease here holds the adapter past the next idle word', async () => {
    const { url, router } = await oneSlotWithAIdle(2500);
    // Someone this node cannot see (a node deciding alone) runs a request of `a`.
    let firstDone = false;
    const first = direct(url, 'a', 30).then((s) => ((firstDone = true), s));
    await waitFor(() => fleet!.replicas[0]!.engine.inFlight('a') > 0, 5000, 'the unseen request running');
    // Once it has ended, the next ask of the unload's fresh read is answered 100 ms late (fresh
    // enough to act on), and the unseen router's next request of `a` reaches the engine 30 ms
    // after the replica wrote that idle word.
    const api = (rt!.manager.replicaWord as unknown as { api: ReplicaApi }).api;
    const activity = api.activity!.bind(api);
    let second: Promise<number> | undefined;
    let seenBusy = false;
    api.activity = async (u, t, names) => {
      if (seenBusy && firstDone && second === undefined) {
        await fleet!.replicas[0]!.fault({ kind: 'slowMetrics', ms: 100 });
        second = new Promise<void>((r) => setTimeout(r, 30)).then(() => direct(url, 'a', 20));
      }
      const word = await activity(u, t, names);
      seenBusy ||= word.busy?.includes('a') ?? false;
      return word;
    };
    const status = await chat(router, 'b', 1); // needs `a`'s slot: withheld while `a` runs
    expect(await first).toBe(200);
    expect(seenBusy).toBe(true); // the unload was withheld while the unseen request ran
    expect(second).toBeDefined();
    await second;
    expect(noBusyUnload(logOf(fleet!)).violations).toEqual([]);
    expect([200, 503]).toContain(status);
  }, 30_000);
});

describe('invariant (i): a busy report any read of this node made holds the adapter', () => {
  // The 30-minute fault run at 3be912e (seed 11, +1110.9 s): node 1, cut off from Redis, routed
  // `chaos-1` alone; node 2's unload found it busy with no lease (withheld), but node 0, whose own
  // unload had never read it busy, read it idle 0.6 s later between two of node 1's requests and
  // unloaded it as the next one reached the engine (`unloaded with 0 running and 1 waiting`). Node
  // 0's polls (every 250 ms) read the replica meanwhile: the hold is fed only by the unload's own word.
  it('a poll that finds the adapter busy with no lease here holds it past the next idle word', async () => {
    const { url, router } = await oneSlotWithAIdle(2500);
    const replica = fleet!.replicas[0]!;
    // Someone this node cannot see runs a request of `a`; this node's polls read it, no unload asks.
    const polls = rt!.poller.stats.polls;
    const first = direct(url, 'a', 30);
    await waitFor(() => replica.engine.inFlight('a') > 0, 5000, 'the unseen request running');
    await waitFor(() => rt!.poller.stats.polls >= polls + 2, 5000, 'two polls while it runs');
    const ranWhilePolled = replica.engine.inFlight('a') > 0;
    expect(await first).toBe(200);
    // The unload's fresh read is answered 100 ms late (fresh enough to act on), and the unseen
    // router's next request of `a` reaches the engine 30 ms after the replica wrote that idle word.
    const api = (rt!.manager.replicaWord as unknown as { api: ReplicaApi }).api;
    const activity = api.activity!.bind(api);
    let second: Promise<number> | undefined;
    api.activity = async (u, t, names) => {
      if (second === undefined) {
        await replica.fault({ kind: 'slowMetrics', ms: 100 });
        second = new Promise<void>((r) => setTimeout(r, 30)).then(() => direct(url, 'a', 20));
      }
      return activity(u, t, names);
    };
    const status = await chat(router, 'b', 1); // needs `a`'s slot
    expect(ranWhilePolled).toBe(true);
    expect(second).toBeDefined();
    await second;
    expect(noBusyUnload(logOf(fleet!)).violations).toEqual([]);
    expect([200, 503]).toContain(status);
  }, 30_000);
});

describe('invariant (i): a poll that finds the adapter busy under a lease here holds nothing', () => {
  it('the adapter this node routed is unloaded for the next one without waiting out a hold', async () => {
    const { router } = await oneSlotWithAIdle(2500);
    const withheld: string[] = [];
    rt!.manager.replicaWord.addWithheldListener((w) => withheld.push(`${w.adapter} ${w.reason}`));
    // This node's own request of `a` (its lease here), read busy by two polls while it runs.
    const polls = rt!.poller.stats.polls;
    const mine = chat(router, 'a', 30);
    await waitFor(() => fleet!.replicas[0]!.engine.inFlight('a') > 0, 5000, 'the request running');
    await waitFor(() => rt!.poller.stats.polls >= polls + 2, 5000, 'two polls while it runs');
    expect(await mine).toBe(200);
    expect(await chat(router, 'b', 1)).toBe(200); // `a`'s slot, as soon as its request ended
    expect(withheld).toEqual([]);
  }, 30_000);
});
