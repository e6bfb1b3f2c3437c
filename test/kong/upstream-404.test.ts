/**
 * A 404 from the replica, read in the log phase (issue 24 item 6). Kong hands the log phase the
 * status, never the body (no `response` phase: docs/kong.md), and a 404 may be the replica's
 * "model does not exist" for the adapter (it restarted, or someone unloaded it) or a client's
 * mistyped path under /v1 (FastAPI's `{"detail":"Not Found"}`). The router does not guess: it
 * asks the replica's registry afresh, and forgets the adapter only if the registry lacks it.
 */
import { KongDriver, PluginServerProcess } from '../../harness/kong/driver';
import { json, onDemand, startWorld, usePluginServer, vllm } from './world';

let driver: KongDriver;
usePluginServer((_s: PluginServerProcess, d) => {
  driver = d;
});

describe('a 404 from the replica in the log phase', () => {
  let w: Awaited<ReturnType<typeof startWorld>> | undefined;
  afterEach(() => w?.stop());

  /** No poll during the test (one refresh on the first request): only the log phase informs the router. */
  const quiet = async () => {
    const world = await startWorld(
      driver,
      [vllm()],
      (u) => onDemand(u, { max_loaded_adapters: 1, stale_after_ms: 3_600_000 }),
      {},
      600_000,
    );
    // lora-poller's 10-minute interval applies once its instance starts; the round the default
    // interval (500 ms) already scheduled runs first.
    await world.statusJson();
    await new Promise((r) => setTimeout(r, 700));
    return world;
  };

  it("a client's mistyped path naming a resident adapter frees no slot: the replica never holds more than its limit", async () => {
    w = await quiet();
    const replica = w.fleet.replicas[0]!;
    let resident = 'a';
    expect((await w.chat(resident)).status).toBe(200);
    for (const next of ['b', 'c', 'd']) {
      const typo = await w.service.handle({
        path: '/v1/chat/completionz',
        headers: { 'content-type': 'application/json' },
        body: Buffer.from(JSON.stringify({ model: resident, messages: [{ role: 'user', content: 'hi' }] })),
      });
      expect([typo.status, json(typo.body)]).toEqual([404, { detail: 'Not Found' }]);
      expect((await w.chat(next)).status).toBe(200);
      resident = next;
    }
    // The simulator's own count: never two runtime-loaded adapters registered at once.
    expect(replica.state().peakRuntimeAdapters).toBe(1);
    expect(replica.adapterLog().map((e) => `${e.op} ${e.name}`)).toEqual([
      'load a',
      'unload a',
      'load b',
      'unload b',
      'load c',
      'unload c',
      'load d',
    ]);
  });

  it("the replica's own 404 for an adapter it lost: the registry, asked afresh, confirms it and the next request loads it", async () => {
    w = await quiet();
    expect((await w.chat('a')).status).toBe(200);
    const polls = (await w.statusJson()).poller.polls;
    // The replica loses 'a' behind the router's back (as after a restart).
    const res = await fetch(`${w.fleet.urls[0]}/v1/unload_lora_adapter`, {
      method: 'POST',
      body: JSON.stringify({ lora_name: 'a' }),
    });
    expect(res.status).toBe(200);
    const lost = await w.chat('a');
    expect([lost.status, json(lost.body).error.message]).toEqual([404, 'The model `a` does not exist.']);
    const s = await w.statusJson();
    const view = s.replicas.find((x: { url: string }) => x.url === w!.fleet.urls[0]);
    expect(view.adapters).toEqual([]); // forgotten: the registry no longer lists it
    expect(s.poller.polls).toBe(polls + 1); // one re-check of that replica, from the log phase
    expect((await w.chat('a')).status).toBe(200); // so it is loaded again
    expect(w.loads(0, 'a').map((e) => e.status)).toEqual([200, 200]);
  });
});
