import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { FleetStore } from '../fleet/store';
import type { ReplicaView } from '../fleet/types';
import type { Stage } from '../scheduler/types';
import type { Clock } from '../clock';
import { RecentHistory } from '../status/history';

/**
 * The router's own Prometheus metrics, served by lora-poller's `.../metrics` route. A registry
 * per runtime (not prom-client's global one), so tests and several runtimes never collide.
 */
export class RouterMetrics {
  readonly registry = new Registry();
  readonly decisions: Counter<'stage'>;
  readonly errors: Counter<'code'>;
  readonly refusals: Counter;
  readonly ttftHolds: Counter;
  /** The last minutes in buckets, for the placement page's charts. */
  readonly recent = new RecentHistory();
  readonly loads: Counter<'result'>;
  readonly unloads: Counter<'result'>;
  readonly unloadsWithheld: Counter<'reason'>;
  readonly loadSeconds: Histogram;
  readonly pollErrors: Counter<'replica'>;
  readonly leasesExpired: Counter;
  /** Decisions by stage not yet added to `decisions` (`decided`). */
  private readonly uncounted = new Map<string, number>();

  /**
   * One routing decision, by the stage that decided: counted here, added to `decisions` when that
   * is read. prom-client's `inc` hashes and checks the labels each time, a library's code and data
   * on every request, which the plugin server runs cache-cold (docs/benchmarks.md).
   */
  decided(stage: Stage): void {
    this.uncounted.set(stage, (this.uncounted.get(stage) ?? 0) + 1);
  }

  /** Drops the series labelled with `url` (a replica that left). */
  forget(url: string): void {
    this.pollErrors.remove({ replica: url });
  }

  /** `saturations`: each replica's saturation as its configuration judges it (count or predicted). */
  constructor(
    store: FleetStore,
    saturations: (replicas: readonly ReplicaView[]) => number[],
    clock: Clock,
    /** Whether a replica the store lists is shown (not one this node left, alone: FleetRuntime.departed). */
    shows: (url: string) => boolean = () => true,
  ) {
    const registers = [this.registry];
    const uncounted = this.uncounted;
    this.decisions = new Counter({
      name: 'lora_router_decisions_total',
      help: 'Routing decisions by the affinity stage that decided.',
      labelNames: ['stage'],
      registers,
      // Brought up to date when read (a scrape, `get()`): see `decided`.
      collect() {
        for (const [stage, n] of uncounted)
          if (n > 0) {
            this.inc({ stage }, n);
            uncounted.set(stage, 0);
          }
      },
    });
    this.errors = new Counter({
      name: 'lora_router_errors_total',
      help: 'Requests answered with an error by the router, by error code.',
      labelNames: ['code'],
      registers,
    });
    this.refusals = new Counter({
      name: 'lora_router_refusals_total',
      help: 'Requests refused for lack of capacity, with Retry-After (a subset of the errors).',
      registers,
    });
    this.ttftHolds = new Counter({
      name: 'lora_router_ttft_holds_total',
      help: 'Requests held in the gateway because every replica was predicted past ttft_slo_ms (once per request).',
      registers,
    });
    this.loads = new Counter({
      name: 'lora_router_adapter_loads_total',
      help: 'Adapter load calls by result.',
      labelNames: ['result'],
      registers,
    });
    this.unloads = new Counter({
      name: 'lora_router_adapter_unloads_total',
      help: 'Adapter unload calls by result.',
      labelNames: ['result'],
      registers,
    });
    this.unloadsWithheld = new Counter({
      name: 'lora_router_unloads_withheld_total',
      help: 'Unloads not made because the replica, asked just before, reported the adapter running or waiting (busy), did not answer (unreachable), or answered idle too late to act on (stale).',
      labelNames: ['reason'],
      registers,
    });
    this.loadSeconds = new Histogram({
      name: 'lora_router_adapter_load_duration_seconds',
      help: 'Duration of successful adapter load calls.',
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60],
      registers,
    });
    this.pollErrors = new Counter({
      name: 'lora_router_poll_errors_total',
      help: 'Failed polls by replica.',
      labelNames: ['replica'],
      registers,
    });
    this.leasesExpired = new Counter({
      name: 'lora_router_leases_expired_total',
      help: 'In-flight leases reclaimed after lease_max_age_ms: their log phase never came.',
      registers,
    });
    // One computation per scrape: the predicted figure compares each replica with the others.
    let figures: number[] = [];
    // Per-replica figures only: views, not a dump of every resident adapter.
    const perReplica = (
      name: string,
      help: string,
      value: (r: ReplicaView, i: number, all: readonly ReplicaView[]) => number,
    ) =>
      new Gauge({
        name,
        help,
        labelNames: ['replica'],
        registers,
        async collect() {
          this.reset();
          const views = await store.views(
            (await store.replicaSpecs()).map((x) => x.url).filter((u) => shows(u)),
          );
          views.forEach((r, i) => this.set({ replica: r.url }, value(r, i, views)));
        },
      });
    perReplica('lora_router_in_flight', 'Requests routed and not yet logged, by replica.', (r) => r.inFlight);
    perReplica(
      'lora_router_replica_saturation',
      "Per replica, as its saturation_mode judges it; >= 1 is saturated. count: max(waiting / target_waiting_per_replica, kv_usage / kv_ceiling). predicted: its predicted wait over the fastest other replica's with a load and saturation_margin_ms.",
      (_r, i, all) => (i === 0 ? (figures = saturations(all)) : figures)[i]!,
    );
    perReplica(
      'lora_router_snapshot_age_seconds',
      'Age of the last successful poll of each replica (-1: never).',
      (r) => (r.snapshotAt === null ? -1 : (clock.now() - r.snapshotAt) / 1000),
    );
    if (store.mode) {
      const mode = store.mode.bind(store);
      new Gauge({
        name: 'lora_router_shared_state_up',
        help: '1 while decisions are shared in Redis; 0 while this node decides alone (Redis unreachable).',
        registers,
        collect() {
          this.set(mode() === 'redis' ? 1 : 0);
        },
      });
    }
  }
}
