/**
 * Faults through the real plugin server and the local gateway: a replica killed, one hanging,
 * one failing its loads, one restarting, one answering 500, one with slow /metrics. Stated in
 * counts, never in elapsed time: every request is answered; while a fault is fresh, only the
 * requests routed to the faulty replica fail; once the router has seen the fault, none goes
 * there and every request is served, as healthy replicas hold room (so no 503); a failing
 * load is tried at most once per replica and adapter within a backoff window; at the end
 * every in-flight count is 0 and no adapter was unloaded under a request.
 */
import type { Fault } from '../../sim/http/replica';
import { KongDriver, PluginServerProcess } from '../../harness/kong/driver';
import { BASE, usePluginServer, startWorld, vllm } from '../kong/world';
import { waitFor } from '../../harness/wait';

let server: PluginServerProcess;
let driver: KongDriver;
usePluginServer((s, d) => {
  server = s;
  driver = d;
});

/** Longer than the whole test: each (replica, adapter) pair may fail at most one load in it. */
const BACKOFF_MS = 600_000;
const BATCH = 24;
const CONCURRENCY = 6;

interface Sent {
  status: number;
  code?: string;
  replica?: string;
}

it('routes around a killed, a hanging, a load-failing, a restarting and a failing replica, losing nothing', async () => {
  const w = await startWorld(
    driver,
    Array.from({ length: 4 }, () => vllm({ timeScale: 20, engine: { loadBaseMs: 1000 } })),
    (u) => ({
      replicas: u.map((url) => ({ url })),
      base_model: BASE,
      adapter_path_template: '/adapters/{name}',
      max_loaded_adapters: 2,
      load_timeout_ms: 400,
      queue_timeout_ms: 1000,
      stale_after_ms: 400,
      refresh_timeout_ms: 200,
      backoff_base_ms: BACKOFF_MS,
      backoff_max_ms: BACKOFF_MS,
    }),
    { timeouts: { read_timeout: 500 } },
  );
  await driver.startInstance('lora-poller', { poll_interval_ms: 100, timeout_ms: 200 });
  const [r0, r1, r2, r3] = w.fleet.replicas as [
    (typeof w.fleet.replicas)[number],
    (typeof w.fleet.replicas)[number],
    (typeof w.fleet.replicas)[number],
    (typeof w.fleet.replicas)[number],
  ];
  const all: Sent[] = [];
  /** BATCH requests over `models`, CONCURRENCY at a time; each one answered, or the batch never ends. */
  const batch = async (models: string[]): Promise<Sent[]> => {
    const out: Sent[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        for (let i = next++; i < BATCH; i = next++) {
          const reply = await w.chat(models[i % models.length]!, 2);
          const rec = reply.kong.ctxShared.get('lora_router') as { replica: string } | undefined;
          let code: string | undefined;
          if (reply.status !== 200) code = JSON.parse(reply.body.toString() || '{}').error?.code;
          out.push({ status: reply.status, code, replica: rec?.replica });
        }
      }),
    );
    expect(out).toHaveLength(BATCH);
    all.push(...out);
    return out;
  };
  const health = async (url: string) =>
    (await w.statusJson()).replicas.find((r: { url: string }) => r.url === url).health as string;
  const seen = (url: string, want: 'up' | 'down') =>
    waitFor(async () => (await health(url)) === want, 5000, `the router sees ${url} ${want}`);
  const failures = (xs: Sent[]) => xs.filter((s) => s.status !== 200);
  const to = (xs: Sent[], r: { url: string }) => xs.filter((s) => s.replica === r.url);
  const tenants = ['t0', 't1'];
  /**
   * Injects a fault in `r`: while it is fresh only the requests routed to `r` fail; once the
   * router sees `r` down, none goes there and every request is served. The fresh batch back.
   */
  const avoided = async (r: (typeof w.fleet.replicas)[number], fault: Fault): Promise<Sent[]> => {
    await r.fault(fault);
    const fresh = await batch(tenants);
    expect(failures(fresh)).toEqual(to(failures(fresh), r));
    await seen(r.url, 'down');
    const after = await batch(tenants);
    expect([failures(after), to(after, r)]).toEqual([[], []]);
    return fresh;
  };

  try {
    expect(failures(await batch(tenants))).toEqual([]);

    // Killed: while the fault is fresh only requests sent to it fail; once seen, none goes there.
    await avoided(r0, { kind: 'kill' });

    // Hanging: the requests it got time out (504); once seen, none goes there.
    const fresh1 = await avoided(r1, { kind: 'hang', on: true });
    expect(failures(fresh1).every((s) => s.status === 504)).toBe(true);

    // Restarting r3: it comes back without its runtime adapters; only the requests routed to
    // it meanwhile fail (connection refused, or 404 for an adapter it lost).
    await r3.fault({ kind: 'restart', downtimeMs: 300 });
    const fresh2 = await batch(tenants);
    expect(failures(fresh2)).toEqual(to(failures(fresh2), r3));
    await seen(r3.url, 'up');
    expect(failures(await batch(tenants))).toEqual([]);

    // Answering 500 on every route: avoided once seen, used again once it recovers.
    await avoided(r2, { kind: 'error500', on: true });
    await r2.fault({ kind: 'error500', on: false });
    await seen(r2.url, 'up');

    // Loads failing on both live replicas, for adapters nobody holds: each (replica, adapter)
    // is tried at most once in the backoff window, however many requests ask; the requests
    // that joined a failed attempt get 502, the others 503 with Retry-After.
    for (const r of [r2, r3]) await r.fault({ kind: 'failLoads', count: 100_000 });
    const cold = [...(await batch(['c0', 'c1'])), ...(await batch(['c0', 'c1']))];
    const attempts = [r2, r3].flatMap((r) =>
      r
        .adapterLog()
        .filter((e) => e.op === 'load' && e.status !== 200)
        .map((e) => `${r.url} ${e.name}`),
    );
    expect(attempts.length).toBeGreaterThanOrEqual(2); // c0 and c1, each somewhere
    expect(new Set(attempts).size).toBe(attempts.length);
    expect(
      cold.filter(
        (s) => !(s.status === 502 && s.code === 'adapter_load_failed') && s.code !== 'adapter_load_backoff',
      ),
    ).toEqual([]);
    expect(cold.filter((s) => s.status === 502).length).toBeLessThanOrEqual(attempts.length * CONCURRENCY);
    for (const r of [r2, r3]) await r.fault({ kind: 'clear' });

    // Slow /metrics, within the poll timeout, is not a failure: r3 stays up.
    await r3.fault({ kind: 'slowMetrics', ms: 100 });
    expect(failures(await batch(tenants))).toEqual([]);
    expect(await health(r3.url)).toBe('up');

    // Nothing lost: every request answered with a status, in-flight back to 0, no unload under
    // a request, the plugin server alive.
    expect(all).toHaveLength(12 * BATCH);
    await r1.fault({ kind: 'hang', on: false });
    await waitFor(async () => (await w.statusJson()).inFlight === 0, 5000, 'every lease released');
    const unloads = w.fleet.replicas.flatMap((r) =>
      r.adapterLog().filter((x) => x.op === 'unload' && x.status === 200),
    );
    expect(unloads.filter((e) => e.inFlight !== 0)).toEqual([]);
    expect(server.exited).toBe(false);
    expect(server.log.filter((l) => /unhandled/i.test(l))).toEqual([]);
  } finally {
    await w.stop();
  }
});
