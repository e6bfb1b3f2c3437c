/**
 * The fault run's clients: each bound to one Kong node, one request at a time, over many
 * adapters (more than the fleet's slots, so nodes must unload), until told to stop. A few
 * requests mistype their path under /v1 (the replica answers 404 for a loaded adapter).
 */
import { seededRandom } from '../src/random';
import type { ChaosNode } from './world';
import { ADAPTER_HEADER, NODE_HEADER } from './senders';

export interface TrafficOptions {
  seed: number;
  clientsPerNode: number;
  adapters: number;
  /** One request in this many goes to a mistyped path under /v1. */
  mistypedEvery: number;
}

export interface TrafficStats {
  sent: number;
  /** Answers by status code (0: the gateway threw). */
  byStatus: Record<string, number>;
  /** Well-formed requests the replica answered 404 (the adapter was not there when it arrived). */
  replica404: number;
  /** Non-200 answers by status and error code. */
  refusals: Record<string, number>;
}

export class Traffic {
  readonly stats: TrafficStats = { sent: 0, byStatus: {}, replica404: 0, refusals: {} };
  private stopping = false;
  private clients: Promise<void>[] = [];

  constructor(
    private readonly nodes: ChaosNode[],
    private readonly o: TrafficOptions,
  ) {}

  start(): void {
    this.clients = this.nodes.flatMap((n) =>
      Array.from({ length: this.o.clientsPerNode }, (_, i) =>
        this.client(n, seededRandom(this.o.seed * 1000 + n.index * 100 + i)),
      ),
    );
  }

  /** Stops sending; resolves once every request under way has been answered. */
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.clients);
  }

  private async client(n: ChaosNode, rnd: () => number): Promise<void> {
    while (!this.stopping) {
      const adapter = `chaos-${Math.floor(rnd() * this.o.adapters)}`;
      const mistyped = rnd() * this.o.mistypedEvery < 1;
      const body = {
        model: adapter,
        messages: [{ role: 'user', content: 'hi' }],
        max_tokens: 5 + Math.floor(rnd() * 40),
      };
      this.stats.sent++;
      let status = 0;
      try {
        const r = await n.router.handle({
          path: mistyped ? '/v1/chat/completion' : '/v1/chat/completions',
          // Forwarded upstream as Kong does: the replica's witness reads who sent it ((i)).
          headers: {
            'content-type': 'application/json',
            [NODE_HEADER]: String(n.index),
            [ADAPTER_HEADER]: adapter,
          },
          body: Buffer.from(JSON.stringify(body)),
        });
        status = r.status;
        if (status === 404 && !mistyped && r.kong.target) this.stats.replica404++;
        if (status !== 200) {
          const key = `${status} ${errorCode(r.body)}`;
          this.stats.refusals[key] = (this.stats.refusals[key] ?? 0) + 1;
        }
      } catch {
        status = 0;
      }
      this.stats.byStatus[status] = (this.stats.byStatus[status] ?? 0) + 1;
      // A refusal comes back at once: a short pause keeps a refusing node from spinning.
      if (status !== 200) await new Promise((r) => setTimeout(r, 20 + rnd() * 80));
    }
  }
}

function errorCode(body: Buffer): string {
  try {
    const e = (JSON.parse(body.toString()) as { error?: { code?: unknown; type?: unknown } }).error;
    return String(e?.code ?? e?.type ?? '?');
  } catch {
    return '(not JSON)';
  }
}
