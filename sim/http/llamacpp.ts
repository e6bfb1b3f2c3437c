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

  /**
   * `GET /lora-adapters` (get_lora_adapters, tools/server/server.cpp, llama.cpp aa6192d38d: id, path, scale, task_name,
   * prompt_prefix, read from the GGUF metadata in common/common.cpp, llama.cpp 00758e06b4). A build without the last
   * two was not read upstream here.
   */
  list() {
    return this.r.o.staticAdapters.map((a, id) => ({
      id,
      path: a.path,
      scale: this.scales[id] ?? 0,
      ...(this.r.o.llamaAdapterInfo ? { task_name: '', prompt_prefix: '' } : {}),
    }));
  }

  /**
   * `POST /lora-adapters` (post_lora_adapters, tools/server/server.cpp, llama.cpp aa6192d38d): a non-array body is a
   * 400 "Request body must be an array"; parse_lora_request(lora_base, body) zeroes every scale and sets the listed
   * ones (server-common.cpp, aa6192d38d); the reply is `{"success": true}` (server-task.cpp apply_lora, aa6192d38d).
   */
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
   * active at once (common_set_adapter_lora passes every adapter with its scale, common/common.cpp,
   * llama.cpp 00758e06b4); the engine sees them as one label, `path+path`. `clear`: server-task.cpp
   * params_from_json_cmpl (llama.cpp aa6192d38d); `empty-is-absent`: server-context.cpp launch_slot_with_task
   * (llama.cpp 001d906a6d; llama.cpp issue 28674, b10088); `listed-only`: not found upstream.
   */
  select(lora: unknown): { adapter: string | null; rank?: number } | string {
    let scales = this.scales;
    const mode = this.r.o.llamaLora;
    const absent = lora === undefined || (mode !== 'clear' && Array.isArray(lora) && lora.length === 0);
    if (!absent) {
      // Upstream's text is "Error: 'lora' must be an array of objects with 'id' and 'scale' fields"
      // (server-task.cpp params_from_json_cmpl, llama.cpp aa6192d38d); this one is shortened.
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

  /**
   * `/slots` (get_slots, tools/server/server.cpp, llama.cpp aa6192d38d: 501 without `--slots`); each slot's to_json
   * has id, n_ctx (the slot's context), speculative and is_processing; the simulator keeps id, n_ctx (= `maxModelLen`)
   * and is_processing.
   */
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

  /**
   * `[{id, scale}]` over `base`; a missing scale is 0 and a bad id is "invalid adapter id" (parse_lora_request,
   * server-common.cpp, llama.cpp aa6192d38d; 006639c3ff no longer checks ids).
   */
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

/** llama.cpp without `--metrics` (get_metrics, tools/server/server.cpp, llama.cpp aa6192d38d). */
export const metricsNotSupported = llamacppError(
  501,
  'not_supported_error',
  'This server does not support metrics endpoint. Start it with `--metrics`',
);
