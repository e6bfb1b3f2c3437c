/**
 * The replica has the last word on loads too (issue 24): before a load into a slot the store
 * believes free, the router reads the replica's own registry (vLLM /v1/models) afresh, so an
 * emptied store or a load by a node cut off from it cannot push the replica past
 * `max_loaded_adapters`. Only on the load path: a hit calls nothing but the request. Its own
 * plugin server (the poll interval is process-wide: the shortest any lora-poller asked for).
 * Verdicts come from the simulator's own registry and adapter log.
 */
import type { SimReplica } from '../../sim/http/replica';
import { KongDriver, PluginServerProcess } from '../../harness/kong/driver';
import { BASE, onDemand, startWorld, usePluginServer, vllm } from './world';

let driver: KongDriver;
usePluginServer((_s: PluginServerProcess, d) => {
  driver = d;
});

describe('the replica has the last word on loads', () => {
  let w: Awaited<ReturnType<typeof startWorld>> | undefined;
  afterEach(() => w?.stop());

  /** Loads `adapter` on the replica without any router seeing it (an emptied store, a node cut off from it). */
  async function loadBehindTheRoutersBack(replica: SimReplica, adapter: string) {
    const r = await fetch(`${replica.url}/v1/load_lora_adapter`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ lora_name: adapter, lora_path: `/adapters/${adapter}` }),
    });
    expect(r.status).toBe(200);
  }

  it('a cold load into a slot the store believes free waits while the replica lists the limit already', async () => {
    // Polls 5 s apart and snapshots fresh for a minute: the store cannot learn of x by a poll
    // before b comes.
    w = await startWorld(
      driver,
      [vllm()],
      (u) => onDemand(u, { max_loaded_adapters: 1, queue_timeout_ms: 20_000, stale_after_ms: 60_000 }),
      {},
      5000,
    );
    const replica = w.fleet.replicas[0]!;
    await w.statusJson(); // lora-poller's 5 s interval applies from its first request
    expect((await w.chat(BASE)).status).toBe(200); // the router knows the replica, holding nothing
    await loadBehindTheRoutersBack(replica, 'x');
    const b = await w.chat('b');
    expect(b.status).toBe(200);
    // Never two runtime adapters at once on a replica limited to one (the simulator's own count)...
    expect(replica.state().peakRuntimeAdapters).toBe(1);
    // ...the idle x made room through the usual unload path, then b loaded.
    const log = replica.adapterLog().map((e) => [e.op, e.name, e.status]);
    expect(log).toEqual([
      ['load', 'x', 200],
      ['unload', 'x', 200],
      ['load', 'b', 200],
    ]);
  });

  it('a hit makes no call to the replica but the request itself', async () => {
    w = await startWorld(
      driver,
      [vllm()],
      (u) => onDemand(u, { max_loaded_adapters: 1, stale_after_ms: 60_000 }),
      {},
      5000,
    );
    const replica = w.fleet.replicas[0]!;
    await w.statusJson(); // lora-poller's 5 s interval applies from its first request
    expect((await w.chat('a')).status).toBe(200);
    const before = replica.state().requests.length;
    const modelsBefore = replica.modelsReads();
    expect((await w.chat('a')).status).toBe(200);
    expect(replica.state().requests.length).toBe(before + 1);
    expect(replica.modelsReads()).toBe(modelsBefore);
  });
});
