/**
 * Views never routed on blind (src/router/stale-refresh.ts), alone: a replica with neither a fresh
 * snapshot nor a recent poll attempt is polled before the decision, bounded by
 * `refresh_timeout_ms`; the views are then read again. A fresh one is left alone.
 */
import { parseRouterConfig } from '../../src/config/parse';
import type { AdapterRef, ReplicaView } from '../../src/fleet/types';
import type { FleetRuntime } from '../../src/runtime';
import { refreshIfStale } from '../../src/router/stale-refresh';

const NOW = 100_000;
const config = parseRouterConfig({
  replicas: [{ url: 'http://a:8000' }, { url: 'http://b:8000' }],
  stale_after_ms: 2000,
  refresh_timeout_ms: 700,
});
const specs = config.replicas.map((r) => ({ url: r.url, backend: r.backend, priority: r.priority }));
const fleet = { config, specs, urls: specs.map((s) => s.url) };

const view = (url: string, snapshotAt: number | null, checkedAt: number | null): ReplicaView => ({
  url,
  backend: 'vllm',
  priority: 0,
  health: 'up',
  snapshotAt,
  checkedAt,
  waiting: 0,
  running: 0,
  inFlight: 0,
  residentCount: 0,
});

function runtime(refresh: (url: string) => Promise<void>, now = NOW) {
  const refreshed: string[] = [];
  const timers: { ms: number; fire: () => void }[] = [];
  const reads: unknown[][] = [];
  const fresh = [view('http://a:8000', NOW, NOW), view('http://b:8000', NOW, NOW)];
  const rt = {
    clock: {
      now: () => now,
      after: (ms: number, fire: () => void) => (timers.push({ ms, fire }), () => undefined),
    },
    poller: {
      refresh: (s: { url: string }) => (refreshed.push(s.url), refresh(s.url)),
    },
    store: {
      views: async (urls: string[], adapter: AdapterRef | undefined, withResidents: boolean) => {
        reads.push([urls, adapter, withResidents]);
        return fresh;
      },
    },
  } as unknown as FleetRuntime;
  return { rt, refreshed, timers, reads, fresh };
}

describe('refreshIfStale', () => {
  it('leaves views alone when each has a snapshot or a poll attempt within stale_after_ms', async () => {
    const r = runtime(async () => undefined);
    const views = [view('http://a:8000', NOW - 2000, null), view('http://b:8000', null, NOW - 2000)];
    expect(await refreshIfStale(fleet, r.rt, views, undefined, false)).toBe(views);
    expect(r.refreshed).toEqual([]);
    expect(r.reads).toEqual([]);
  });

  it('polls each replica stale on both counts, then reads the views again', async () => {
    const r = runtime(async () => undefined);
    const adapter = { name: 'x' };
    const views = [view('http://a:8000', NOW - 2001, null), view('http://b:8000', null, NOW - 1)];
    expect(await refreshIfStale(fleet, r.rt, views, adapter, true)).toBe(r.fresh);
    expect(r.refreshed).toEqual(['http://a:8000']);
    expect(r.reads).toEqual([[['http://a:8000', 'http://b:8000'], adapter, true]]);
  });

  it('a replica never polled is stale even when the clock is younger than stale_after_ms (a simulation)', async () => {
    const r = runtime(async () => undefined, 1000);
    const views = [view('http://a:8000', null, null), view('http://b:8000', 0, 0)];
    expect(await refreshIfStale(fleet, r.rt, views, undefined, false)).toBe(r.fresh);
    expect(r.refreshed).toEqual(['http://a:8000']);
  });

  it('waits for a poll that does not end at most refresh_timeout_ms', async () => {
    const r = runtime(() => new Promise<void>(() => undefined));
    const views = [view('http://a:8000', null, null), view('http://b:8000', null, NOW - 2001)];
    const done = refreshIfStale(fleet, r.rt, views, undefined, false);
    await new Promise((resolve) => setImmediate(resolve));
    expect(r.refreshed).toEqual(['http://a:8000', 'http://b:8000']);
    expect(r.timers.map((t) => t.ms)).toEqual([700]);
    expect(r.reads).toEqual([]);
    r.timers[0]!.fire();
    expect(await done).toBe(r.fresh);
  });
});
