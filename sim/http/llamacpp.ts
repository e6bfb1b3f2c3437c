import { llamacppError, type SimError } from './errors';
import type { ReplicaContext } from './context';

/**
 * llama.cpp server's adapters (tools/server/server.cpp and server-common.cpp; see
 * docs/replica-apis.md for the builds): loaded at start only, selected per request by id with
 * a scale, global scales settable with `POST /lora-adapters`.
 */
export class LlamaCppAdapters {
  /** Global scale per adapter id. */
  private scales: number[] = [];

  constructor(private readonly r: ReplicaContext) {}

  boot(): void {
    this.scales = this.r.o.staticAdapters.map((a) => a.scale ?? 1);
  }

  /** `GET /lora-adapters`; newer builds add each adapter's `task_name` and `prompt_prefix` (GGUF metadata). */
  list() {
    return this.r.o.staticAdapters.map((a, id) => ({
      id,
      path: a.path,
      scale: this.scales[id] ?? 0,
      ...(this.r.o.llamaAdapterInfo ? { task_name: '', prompt_prefix: '' } : {}),
    }));
  }

  /** `POST /lora-adapters`: the listed scales; unlisted adapters go to 0. */
  setGlobal(body: unknown): SimError {
    if (!Array.isArray(body))
      return llamacppError(400, 'invalid_request_error', 'Request body must be an array');
    const next = this.parse(
      body,
      this.scales.map(() => 0),
    );
    if (typeof next === 'string') return llamacppError(400, 'invalid_request_error', next);
    this.scales = next;
    return { status: 200, body: { success: true } };
  }

  /**
   * The adapters a request runs with, by `llamaLora` mode (see LlamaLoraMode): several may be
   * active at once; the engine sees them as one label, `path+path`.
   */
  select(lora: unknown): { adapter: string | null; rank?: number } | string {
    let scales = this.scales;
    const mode = this.r.o.llamaLora;
    const absent = lora === undefined || (mode !== 'clear' && Array.isArray(lora) && lora.length === 0);
    if (!absent) {
      if (!Array.isArray(lora)) return 'lora must be an array';
      const parsed = this.parse(lora, mode === 'listed-only' ? [...this.scales] : this.scales.map(() => 0));
      if (typeof parsed === 'string') return parsed;
      scales = parsed;
    }
    const active = this.r.o.staticAdapters.filter((_, id) => (scales[id] ?? 0) !== 0);
    if (active.length === 0) return { adapter: null };
    return {
      adapter: active.map((a) => a.path).join('+'),
      rank: active.reduce((n, a) => n + (a.rank ?? this.r.o.defaultRank), 0),
    };
  }

  /** `/slots` (only with `--slots`: without it, 501). */
  slots(): SimError {
    if (!this.r.o.llamaSlots)
      return llamacppError(
        501,
        'not_supported_error',
        'This server does not support slots endpoint. Start it with `--slots`',
      );
    const running = this.r.engine.stats().running;
    const n = this.r.engine.options.maxNumSeqs;
    return {
      status: 200,
      body: Array.from({ length: n }, (_, id) => ({
        id,
        n_ctx: this.r.o.maxModelLen,
        is_processing: id < running,
      })),
    };
  }

  /** `[{id, scale}]` over `base`; a bad id is an error message. */
  private parse(list: unknown[], base: number[]): number[] | string {
    const scales = [...base];
    for (const e of list as { id?: unknown; scale?: unknown }[]) {
      const id = e?.id;
      if (typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id >= scales.length)
        return 'invalid adapter id';
      scales[id] = typeof e.scale === 'number' ? e.scale : 0;
    }
    return scales;
  }
}

/** llama.cpp without `--metrics`. */
export const metricsNotSupported = llamacppError(
  501,
  'not_supported_error',
  'This server does not support metrics endpoint. Start it with `--metrics`',
);
