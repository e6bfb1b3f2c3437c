/**
 * The replica has the last word on unloads (issue 24): before any unload the router scrapes the
 * replica's /metrics afresh and never unloads an adapter it reports running or waiting, whatever
 * its own lease bookkeeping says. The bookkeeping here is wrong on purpose: a request reaches the
 * replica without passing this router (another router that does not share the state, a lease
 * that expired or that a store forgot), so the router's lease count for its adapter is 0.
 * Every verdict comes from the simulator's own log and request records, not from the router.
 */
import type { SimReplica } from '../../sim/http/replica';
import { waitFor } from '../../harness/wait';
import { KongDriver, PluginServerProcess } from '../../harness/kong/driver';
import { BASE, onDemand, startPluginServer, startWorld, usePluginServer, vllm } from './world';

let driver: KongDriver;
usePluginServer((_s: PluginServerProcess, d) => {
  driver = d;
});

/** Starts a long request of `adapter` straight at the replica, and waits until its engine runs it. */
async function behindTheRoutersBack(replica: SimReplica, adapter: string, maxTokens: number) {
  const done = fetch(`${replica.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model: adapter,
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: maxTokens,
    }),
  }).then(async (r) => ({
    status: r.status,
    body: (await r.json()) as { usage?: { completion_tokens?: number } },
  }));
  const running = () =>
    adapter === BASE
      ? replica.engine.stats().running > 0
      : replica.engine.stats().runningAdapters.includes(adapter);
  await waitFor(running, 5000, `${adapter} running`);
  return done;
}

describe('the replica has the last word on unloads', () => {
  let w: Awaited<ReturnType<typeof startWorld>> | undefined;
  afterEach(() => w?.stop());

  it('a cold request never unloads an adapter the replica reports running, though no lease holds it', async () => {
    w = await startWorld(driver, [vllm()], (u) =>
      onDemand(u, { max_loaded_adapters: 1, queue_timeout_ms: 20_000 }),
    );
    const replica = w.fleet.replicas[0]!;
    expect((await w.chat('a')).status).toBe(200); // the router loads a
    // 800 tokens at 20 ms per step, time scaled by 10: about 1.6 s of real time.
    const direct = behindTheRoutersBack(replica, 'a', 800);
    const b = await w.chat('b'); // needs a's slot
    const d = await direct;
    // The request the router never saw ran to its end...
    expect(d.status).toBe(200);
    expect(d.body.usage?.completion_tokens).toBe(800);
    const aRecord = replica.requestRecords().find((r) => r.adapter === 'a' && r.outputTokens === 800)!;
    expect(aRecord.aborted).toBeUndefined();
    // ...and a was never unloaded while the engine had a request of it (the simulator's own count).
    const unloads = replica.adapterLog().filter((e) => e.op === 'unload');
    expect(unloads.map((e) => [e.name, e.inFlight])).toEqual([['a', 0]]);
    // b waited for room as for a busy lease, then made it once the replica was done with a.
    expect(b.status).toBe(200);
    expect(unloads[0]!.at).toBeGreaterThanOrEqual(aRecord.end!);
    expect(w.loads(0).map((e) => [e.name, e.status])).toEqual([
      ['a', 200],
      ['b', 200],
    ]);
    // Operators see the bookkeeping disagree with the replica.
    const metrics = (await w.status.handle({ method: 'GET', path: '/lora/metrics' })).body.toString();
    expect(
      Number(/^lora_router_unloads_withheld_total\{reason="busy"\} (\d+)$/m.exec(metrics)?.[1]),
    ).toBeGreaterThan(0);
  });

  it('a waiting request counts too: an adapter the replica reports waiting is not unloaded', async () => {
    // One running slot: a request of a waits behind one of the base model.
    w = await startWorld(driver, [vllm({ engine: { maxNumSeqs: 1 } })], (u) =>
      onDemand(u, { max_loaded_adapters: 1, queue_timeout_ms: 20_000 }),
    );
    const replica = w.fleet.replicas[0]!;
    expect((await w.chat('a')).status).toBe(200);
    const base = behindTheRoutersBack(replica, BASE, 600);
    const waiting = fetch(`${replica.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'a', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
    });
    await waitFor(() => replica.engine.stats().waitingAdapters.includes('a'), 5000, 'a waiting');
    const b = await w.chat('b');
    expect((await waiting).status).toBe(200);
    expect((await base).status).toBe(200);
    expect(b.status).toBe(200);
    const unloads = replica.adapterLog().filter((e) => e.op === 'unload');
    expect(unloads.map((e) => [e.name, e.inFlight])).toEqual([['a', 0]]);
  });

  it('an adapter named with a comma is not unloaded under a request the replica reports running', async () => {
    // vLLM joins the names in lora_requests_info with ',' (PrometheusStatLogger.record,
    // vllm/v1/metrics/loggers.py): 'team,a' running reads as 'team' and 'a' running. A name the
    // report cannot carry unambiguously is busy whenever the report may be naming it.
    w = await startWorld(driver, [vllm({ adapterPaths: { '/adapters/team,a': 8 } })], (u) =>
      onDemand(u, {
        max_loaded_adapters: 1,
        queue_timeout_ms: 20_000,
        adapter_name_pattern: '^[A-Za-z0-9][A-Za-z0-9._,-]{0,127}$',
      }),
    );
    const replica = w.fleet.replicas[0]!;
    expect((await w.chat('team,a')).status).toBe(200); // the router loads team,a
    const direct = behindTheRoutersBack(replica, 'team,a', 800);
    const b = await w.chat('b'); // needs team,a's slot
    const d = await direct;
    expect(d.status).toBe(200);
    const record = replica.requestRecords().find((r) => r.adapter === 'team,a' && r.outputTokens === 800)!;
    // team,a was never unloaded while the engine had a request of it (the simulator's own count).
    const unloads = replica.adapterLog().filter((e) => e.op === 'unload');
    expect(unloads.map((e) => [e.name, e.inFlight])).toEqual([['team,a', 0]]);
    expect(unloads[0]!.at).toBeGreaterThanOrEqual(record.end!);
    expect(b.status).toBe(200);
  });

  it('a replica that cannot say (no lora_requests_info: vLLM with --disable-log-stats) keeps the lease rules alone', async () => {
    w = await startWorld(driver, [vllm({ vllmMetrics: 'no-stats' })], (u) =>
      onDemand(u, { max_loaded_adapters: 1, queue_timeout_ms: 20_000 }),
    );
    const replica = w.fleet.replicas[0]!;
    expect((await w.chat('a')).status).toBe(200);
    const direct = behindTheRoutersBack(replica, 'a', 800);
    const b = await w.chat('b');
    // The lease count is the only word: 0, so a is unloaded at once (released vLLM keeps its
    // weights, and the request goes on; docs/reliability.md says what such a replica gets).
    expect(b.status).toBe(200);
    const unloads = replica.adapterLog().filter((e) => e.op === 'unload');
    expect(unloads.map((e) => [e.name, e.inFlight])).toEqual([['a', 1]]);
    expect((await direct).status).toBe(200);
  });
});

describe('a poll renews the lease of an adapter named with a comma while the replica runs it', () => {
  it('a request longer than lease_max_age_ms keeps its lease', async () => {
    // A plugin server of its own: leases are reclaimed past the longest lease_max_age_ms any
    // configuration in the process registered.
    const own = await startPluginServer();
    let w: Awaited<ReturnType<typeof startWorld>> | undefined;
    try {
      w = await startWorld(own.driver, [vllm({ adapterPaths: { '/adapters/team,a': 8 } })], (u) =>
        onDemand(u, { lease_max_age_ms: 3000, adapter_name_pattern: '^[A-Za-z0-9][A-Za-z0-9._,-]{0,127}$' }),
      );
      const started = Date.now();
      // 2000 tokens at 20 ms per step, time scaled by 10: about 4 s, past the lease's age (3 s)
      // and well below LEASE_CEILING of them (12 s), past which a lease is reclaimed however renewed.
      const r = await w.chat('team,a', 2000);
      expect(r.status).toBe(200);
      expect(Date.now() - started).toBeGreaterThan(3000); // the lease outlived lease_max_age_ms
      expect((await w.statusJson()).poller.leasesExpired).toBe(0);
    } finally {
      await w?.stop();
      own.driver.close();
      await own.server.stop();
    }
  });
});
