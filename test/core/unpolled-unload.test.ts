/**
 * An adapter this node reads `unloading` only from its own records (src/adapters/own-unloads.ts:
 * a done unload after the shared state came back from an outage, or one whose lock the store had
 * lost) stays so until a poll of its replica begun after that time. A request held on it asks for
 * that poll at once (review 62's open point), rather than wait for the next scheduled round: with
 * `poll_interval_ms` past the queue and load timeouts it got a 503. Two nodes (two runtimes on one
 * store), a virtual clock, one replica whose registry the fake API keeps.
 */
import type { LoadOutcome, ReplicaApi, Scrape, UnloadOutcome } from '../../src/backends/replica-api';
import { BackendError } from '../../src/backends/errors';
import { sleep, VirtualClock } from '../../src/clock';
import { parseRouterConfig } from '../../src/config/parse';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import type { ReplicaSpec } from '../../src/fleet/types';
import { silentLogger } from '../../src/log';
import { RouterService, type RouteOutcome } from '../../src/router/router';
import { FleetRuntime } from '../../src/runtime';

const R = 'http://10.0.0.1:8000';
/** Far past the queue and load timeouts: no scheduled poll round comes while a request waits. */
const POLL_MS = 60_000;

/** One replica's registry, shared by the nodes' APIs; each API counts its own scrapes. */
class Replica {
  readonly registry = new Set<string>();
  /**
   * Scrapes still to time out, each after the poll's timeout on `clock` (the poller gives the
   * replica the benefit of the doubt: it stays up).
   */
  timeouts = 0;
  /** While set, every scrape is refused at once (the poller marks the replica down). */
  refusing = false;
  clock: VirtualClock | undefined;

  /** The scrape's fault, if any: a refusal at once, or a timeout after `timeoutMs`. */
  async fault(timeoutMs: number): Promise<void> {
    if (this.refusing) throw new BackendError('connect', 'connection refused');
    if (this.timeouts === 0) return;
    this.timeouts--;
    await sleep(this.clock!, timeoutMs);
    throw new BackendError('timeout', 'scrape timed out');
  }

  api(): ReplicaApi & { scrapes: number } {
    const registry = this.registry;
    const fault = (timeoutMs: number) => this.fault(timeoutMs);
    return {
      scrapes: 0,
      async scrape(this: { scrapes: number }, _r: ReplicaSpec, timeoutMs: number): Promise<Scrape> {
        this.scrapes++;
        await fault(timeoutMs);
        return {
          load: { running: 0, waiting: 0, kvUsage: 0.1, activeAdapters: [], malformedLines: 0 },
          registry: [...registry].map((name) => ({ name, path: `/adapters/${name}` })),
        };
      },
      async loadAdapter(_url: string, name: string): Promise<LoadOutcome> {
        registry.add(name);
        return 'loaded';
      },
      async unloadAdapter(_url: string, name: string): Promise<UnloadOutcome> {
        registry.delete(name);
        return 'unloaded';
      },
    };
  }
}

function node(store: MemoryFleetStore, clock: VirtualClock, replica: Replica, seed: number) {
  const api = replica.api();
  const rt = new FleetRuntime({
    log: silentLogger,
    store,
    api,
    clock,
    seed,
    poller: { intervalMs: POLL_MS },
  });
  // The runtime's hook for the shared state back after an outage (FailoverFleetStore calls it):
  // taken now, as the next node's runtime sets its own on this one store.
  const sharedAgain = rt.store.onSharedAgain!;
  const router = new RouterService(
    parseRouterConfig({
      replicas: [{ url: R }],
      base_model: 'base',
      adapter_path_template: '/adapters/{name}',
      max_loaded_adapters: 1,
      queue_timeout_ms: 2000,
      load_timeout_ms: 2000,
    }),
    rt,
  );
  return { rt, router, api, sharedAgain };
}

const completion = (model: string) => Buffer.from(JSON.stringify({ model, prompt: 'hi', max_tokens: 1 }));

/** Routes a request for `model`, the clock run up to 10 s meanwhile, and gives its lease back as served. */
async function send(n: ReturnType<typeof node>, clock: VirtualClock, model: string): Promise<RouteOutcome> {
  let outcome: RouteOutcome | undefined;
  const routed = n.router
    .route({ path: '/v1/completions', body: completion(model) })
    .then((o) => (outcome = o));
  const until = clock.now() + 10_000;
  while (outcome === undefined && clock.now() < until) await clock.run(Math.min(until, clock.now() + 100));
  await routed;
  if (outcome!.kind === 'proxy') await n.router.finish(outcome!.leaseId, 200);
  return outcome!;
}

describe('an adapter read `unloading` from this node’s own unload records', () => {
  const stops: (() => void)[] = [];
  afterEach(() => {
    for (const s of stops.splice(0)) s();
  });

  async function twoNodes() {
    const store = new MemoryFleetStore();
    const clock = new VirtualClock();
    const replica = new Replica();
    replica.clock = clock;
    const n1 = node(store, clock, replica, 1);
    const n2 = node(store, clock, replica, 2);
    stops.push(
      () => n1.rt.stop(),
      () => n2.rt.stop(),
    );
    await n1.rt.poller.refreshUrl(R);
    // Node 1 loads `a`, then unloads it to make room for `b` (recorded); node 2 loads `a` again there.
    expect(await send(n1, clock, 'a')).toMatchObject({ kind: 'proxy', url: R });
    expect(await send(n1, clock, 'b')).toMatchObject({ kind: 'proxy', url: R });
    expect(await send(n2, clock, 'a')).toMatchObject({ kind: 'proxy', url: R });
    expect([...replica.registry]).toEqual(['a']);
    return { store, clock, replica, n1, n2 };
  }

  it('after the shared state is back from an outage, a request for it is served after a poll it asks for, not refused at its timeout', async () => {
    const { clock, n1 } = await twoNodes();
    // The shared state is back after an outage (FailoverFleetStore's `onSharedAgain`): node 1 reads
    // `a` on R `unloading` until a poll of its own begun after now, whatever the store says.
    n1.sharedAgain();
    const scrapes = n1.api.scrapes;
    // Unchanged: a 503 at the queue timeout (2 s), the next poll round 60 s away.
    const outcome = await send(n1, clock, 'a');
    expect(outcome.kind === 'proxy' ? outcome.url : outcome.status).toBe(R);
    // One poll, asked by the request; no more while it waited.
    expect(n1.api.scrapes - scrapes).toBe(1);
  });

  it('requests held on it at once ask for one poll between them', async () => {
    const { clock, n1 } = await twoNodes();
    n1.sharedAgain();
    const scrapes = n1.api.scrapes;
    const outcomes = await Promise.all([send(n1, clock, 'a'), send(n1, clock, 'a'), send(n1, clock, 'a')]);
    expect(outcomes.map((o) => (o.kind === 'proxy' ? o.url : o.status))).toEqual([R, R, R]);
    expect(n1.api.scrapes - scrapes).toBe(1);
  });

  it('an asked poll that timed out (the replica kept up) is asked again: the request held is served, not refused at its timeout', async () => {
    const { clock, n1, replica } = await twoNodes();
    n1.sharedAgain();
    // The asked poll times out (1 s, the default poll timeout) once; the replica stays up (one
    // timeout in a row is below the threshold) and answers the next poll.
    replica.timeouts = 1;
    const scrapes = n1.api.scrapes;
    const outcome = await send(n1, clock, 'a');
    // Unchanged: no second ask for the same end, so it waited out its queue timeout (503) while
    // the replica answered, the next round 60 s away.
    expect(outcome.kind === 'proxy' ? outcome.url : outcome.status).toBe(R);
    expect(n1.api.scrapes - scrapes).toBe(2);
  });

  it('a replica refusing its asked polls is asked again no sooner than the poll timeout after each ask', async () => {
    const { clock, n1, replica } = await twoNodes();
    n1.sharedAgain();
    replica.refusing = true;
    const scrapes = n1.api.scrapes;
    // Down, and the only replica: refused at its timeout, polled meanwhile at most once a second.
    const outcome = await send(n1, clock, 'a');
    expect(outcome.kind).toBe('respond');
    expect(n1.api.scrapes - scrapes).toBeLessThanOrEqual(3);
  });
});
