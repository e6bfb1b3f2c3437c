/**
 * Faults while a bounded load runs through the real plugin server and the local gateway: a
 * replica killed, one hanging, one failing its loads, one restarting. Nothing is lost: no
 * request goes to the dead replica after 2 poll intervals, the hanging one costs at most the
 * timeout and is then avoided, failing loads back off, and at the end every in-flight count is
 * 0 and no adapter was unloaded under a request (checked against the simulator's logs).
 */
import { seededRandom } from '../../src/random';
import { KongDriver, PluginServerProcess } from '../kong/driver';
import { BASE, usePluginServer, startWorld, vllm } from '../kong/world';

let server: PluginServerProcess;
let driver: KongDriver;
usePluginServer((s, d) => {
  server = s;
  driver = d;
});

const POLL_MS = 100;
const POLL_TIMEOUT_MS = 200;
const UPSTREAM_TIMEOUT_MS = 500;
const BACKOFF_MS = 1500;
const LOAD_TIMEOUT_MS = 400;
const REFRESH_TIMEOUT_MS = 200;
const TIME_SCALE = 20;
const RUN_MS = 7000;
const MAX_REQUESTS = 4000;

interface Sent {
  at: number;
  ms: number;
  status: number;
  replica?: string;
}

it('routes around a killed, a hanging, a load-failing and a restarting replica, losing nothing', async () => {
  const w = await startWorld(
    driver,
    Array.from({ length: 4 }, () => vllm({ timeScale: TIME_SCALE, engine: { loadBaseMs: 1000 } })),
    (u) => ({
      replicas: u.map((url) => ({ url })),
      base_model: BASE,
      adapter_path_template: '/adapters/{name}',
      max_loaded_adapters: 2,
      load_timeout_ms: LOAD_TIMEOUT_MS,
      queue_timeout_ms: 1000,
      stale_after_ms: 400,
      refresh_timeout_ms: REFRESH_TIMEOUT_MS,
      backoff_base_ms: BACKOFF_MS,
      backoff_max_ms: 6000,
    }),
    { upstreamTimeoutMs: UPSTREAM_TIMEOUT_MS },
  );
  // The poll interval of this process, as lora-poller sets it.
  await driver.startInstance('lora-poller', { poll_interval_ms: POLL_MS, timeout_ms: POLL_TIMEOUT_MS });
  const [r0, r1, r2, r3] = w.fleet.replicas as [any, any, any, any];
  const url = (r: { url: string }) => r.url;
  try {
    const t0 = Date.now();
    const sent: Sent[] = [];
    const rand = seededRandom(11);
    const faultsAt = {
      kill: 1000,
      hang: 2000,
      failLoads: 3000,
      restart: 4000,
      error500: 5000,
      slowMetrics: 5500,
      clear500: 6000,
    };
    const faults = (async () => {
      const at = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, t0 + ms - Date.now())));
      await at(faultsAt.kill);
      await r0.fault({ kind: 'kill' });
      await at(faultsAt.hang);
      await r1.fault({ kind: 'hang', on: true });
      await at(faultsAt.failLoads);
      await r2.fault({ kind: 'failLoads', count: 100000 });
      await at(faultsAt.restart);
      await r3.fault({ kind: 'restart', downtimeMs: 300 });
      await at(faultsAt.error500);
      await r2.fault({ kind: 'clear' });
      await r2.fault({ kind: 'error500', on: true });
      await at(faultsAt.slowMetrics);
      await r3.fault({ kind: 'slowMetrics', ms: POLL_TIMEOUT_MS / 2 });
      await at(faultsAt.clear500);
      await r2.fault({ kind: 'error500', on: false });
    })();
    const worker = async () => {
      while (Date.now() - t0 < RUN_MS && sent.length < MAX_REQUESTS) {
        const model = `tenant-${Math.floor(rand() * 8)}`;
        const at = Date.now() - t0;
        const reply = await w.chat(model, 2);
        const rec = reply.kong.ctxShared.get('lora_router') as { replica: string } | undefined;
        sent.push({ at, ms: Date.now() - t0 - at, status: reply.status, replica: rec?.replica });
      }
    };
    await Promise.all([faults, ...Array.from({ length: 8 }, worker)]);

    // Every answer is one the gateway may give: served, or a clean upstream / routing failure.
    const statuses = new Set(sent.map((s) => s.status));
    // (500: the replica's own answer while it fails, passed through as Kong would. 404: the
    // restarted replica lost its adapters; only requests routed before anyone could know.)
    for (const st of statuses) expect([200, 404, 500, 502, 503, 504]).toContain(st);
    const lost = sent.filter((s) => s.status === 404);
    for (const s of lost) expect(s.replica).toBe(url(r3));
    for (const s of lost) expect(s.at).toBeLessThan(faultsAt.restart + 300 + 2 * POLL_MS + POLL_TIMEOUT_MS);
    expect(sent.filter((s) => s.status === 200).length).toBeGreaterThan(200);

    // Dead replica: nothing routed to it 2 poll intervals (+ one poll's timeout) after the kill.
    const deadline0 = faultsAt.kill + 2 * POLL_MS + POLL_TIMEOUT_MS;
    expect(sent.filter((s) => s.replica === url(r0) && s.at > deadline0)).toEqual([]);

    // Hanging replica: each request it got cost at most the upstream timeout; then avoided.
    const toR1 = sent.filter((s) => s.replica === url(r1) && s.at >= faultsAt.hang);
    // Each wait a request can meet there is bounded: a snapshot refresh, a load, the upstream.
    const bound = REFRESH_TIMEOUT_MS + LOAD_TIMEOUT_MS + UPSTREAM_TIMEOUT_MS + 200;
    for (const s of toR1) expect(s.ms).toBeLessThan(bound);
    const deadline1 = faultsAt.hang + 2 * POLL_MS + POLL_TIMEOUT_MS + UPSTREAM_TIMEOUT_MS;
    expect(sent.filter((s) => s.replica === url(r1) && s.at > deadline1)).toEqual([]);

    // Failing loads: at most one attempt per (replica, adapter) per backoff window.
    const failed = r2
      .adapterLog()
      .filter((e: { op: string; status: number }) => e.op === 'load' && e.status !== 200);
    const byAdapter = new Map<string, number[]>();
    for (const e of failed) byAdapter.set(e.name, [...(byAdapter.get(e.name) ?? []), e.at / TIME_SCALE]);
    for (const times of byAdapter.values()) {
      for (let i = 1; i < times.length; i++)
        expect(times[i]! - times[i - 1]!).toBeGreaterThanOrEqual(BACKOFF_MS * 0.95);
    }

    // Replica answering 500s: avoided within 2 poll intervals (its /metrics fails too), and
    // after 3 upstream failures in a row at the latest.
    const deadline2 = faultsAt.error500 + 2 * POLL_MS + POLL_TIMEOUT_MS;
    expect(sent.filter((s) => s.replica === url(r2) && s.at > deadline2 && s.at < faultsAt.clear500)).toEqual(
      [],
    );

    // Slow /metrics (within the poll timeout) is not a failure: the replica keeps serving.
    expect(
      sent.some(
        (s) => s.replica === url(r3) && s.status === 200 && s.at > faultsAt.slowMetrics + 2 * POLL_MS,
      ),
    ).toBe(true);

    // The restarted replica came back and served again.
    expect(sent.some((s) => s.replica === url(r3) && s.status === 200 && s.at > faultsAt.restart + 600)).toBe(
      true,
    );

    // Nothing lost: in-flight back to 0, no unload under a request, the plugin server alive.
    await r1.fault({ kind: 'hang', on: false });
    const status = await w.statusJson();
    expect(status.inFlight).toBe(0);
    for (const r of w.fleet.replicas) {
      for (const e of r.adapterLog().filter((x) => x.op === 'unload' && x.status === 200))
        expect(e.inFlight).toBe(0);
    }
    expect(server.exited).toBe(false);
    expect(server.log.filter((l) => /unhandled/i.test(l))).toEqual([]);
  } finally {
    await w.stop();
  }
});
