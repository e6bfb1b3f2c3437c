/**
 * The replicas of the simulated world: the simulator's vLLM (sim/http, its LoRA registry, error
 * texts and /metrics as the real one answers) around its engine model, reached in process. Each
 * node talks to them through the real HttpReplicaApi, whose ReplicaHttp is replaced here by a
 * call without a socket: same answers, bounded by the caller's timeout on its node's clock.
 */
import { BackendError } from '../src/backends/errors';
import type { HttpReply, ReplicaHttp } from '../src/backends/http';
import type { Clock } from '../src/clock';
import type { Random } from '../src/random';
import { loadCostFor } from '../sim/engine/load-cost';
import { SimReplica } from '../sim/http/replica';
import { trip } from './scheduler';

/** Unix seconds at virtual time 0: a fixed date, so the replicas' `Date` headers replay exactly. */
const EPOCH_UNIX = 1_780_000_000;

export interface ReplicaSetOptions {
  replicas: number;
  /** vLLM --max-loras (the engine's batch bound), at least the router's max_loaded_adapters. */
  maxLoras: number;
  /** Load time of an adapter (rank 16). */
  loadMs: number;
  /** ms per decode step: a request of n tokens takes about n steps. */
  decodeMsPerStep: number;
}

export class ReplicaSet {
  readonly replicas: SimReplica[];
  readonly urls: string[];
  private readonly byOrigin = new Map<string, SimReplica>();

  constructor(clock: Clock, o: ReplicaSetOptions) {
    this.replicas = Array.from(
      { length: o.replicas },
      () =>
        new SimReplica({
          clock,
          epochUnix: EPOCH_UNIX,
          adapterDirs: ['/adapters'],
          engine: {
            maxLoras: o.maxLoras,
            maxCpuLoras: o.maxLoras + 1,
            decodeMsPerStep: o.decodeMsPerStep,
            ...loadCostFor(o.loadMs, 16),
          },
        }),
    );
    this.urls = this.replicas.map((_, i) => `http://replica-${i}:8000`);
    this.replicas.forEach((r, i) => this.byOrigin.set(this.urls[i]!, r));
  }

  replica(url: string): SimReplica {
    const r = this.byOrigin.get(url);
    if (!r) throw new Error(`no replica ${url}`);
    return r;
  }

  /**
   * A process's HTTP to the replicas: each call takes 0-2 ms each way (seeded, `trip`), is answered by
   * the replica in process and bounded by `timeoutMs` on `clock`. `alive`: a dead process's
   * calls are never answered (its pending work just stops).
   */
  http(clock: Clock, random: Random, alive: () => boolean): ReplicaHttp {
    const call = (
      method: 'GET' | 'POST',
      url: string,
      timeoutMs: number,
      body?: unknown,
    ): Promise<HttpReply> => {
      const u = new URL(url);
      const replica = this.replica(u.origin);
      return new Promise<HttpReply>((resolve, reject) => {
        let settled = false;
        const cancel = clock.after(timeoutMs, () => {
          if (settled) return;
          settled = true;
          abort();
          reject(new BackendError('timeout', `${method} ${url}: no answer within ${timeoutMs} ms`));
        });
        let abort = () => {};
        trip(clock, random, () => {
          if (settled || !alive()) return;
          const x = replica.exchange(method, u.pathname, body === undefined ? '' : JSON.stringify(body));
          abort = x.abort;
          void x.reply.then((r) => {
            trip(clock, random, () => {
              if (settled || !alive()) return;
              settled = true;
              cancel();
              resolve(r);
            });
          });
        });
      });
    };
    return { call, close: async () => undefined } as unknown as ReplicaHttp;
  }
}
