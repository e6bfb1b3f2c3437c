import { llamacppError, type SimError } from './errors';
import type { ReplicaContext } from './context';

/** params_from_json_cmpl's text for a `lora` that is not a list (server-task.cpp, llama.cpp b7193, b7502). */
const LORA_NOT_A_LIST = "Error: 'lora' must be an array of objects with 'id' and 'scale' fields";

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
   * `GET /lora-adapters` (get_lora_adapters, tools/server/server.cpp at llama.cpp b7193; server_task_result_get_lora,
   * server-task.cpp, b10573: id, path, scale, task_name, prompt_prefix, read from the GGUF metadata in
   * common/common.cpp at both). A build without the last two was not read upstream here.
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
   * `POST /lora-adapters` (post_lora_adapters: tools/server/server.cpp at llama.cpp b7193, server-context.cpp at
   * b10573): a non-array body is a 400 "Request body must be an array"; the listed scales are set, every other one
   * goes to 0 (parse_lora_request(lora_base, body), server-common.cpp, b7193; construct_lora_list, b10573); the
   * reply is `{"success": true}` (server-task.cpp, both). An unknown id: see `parse`; thrown here, it reaches
   * ex_wrapper (server.cpp, b7193 and b7502), which answers any std::runtime_error 500 `server_error`.
   */
  setGlobal(body: unknown): SimError {
    if (!Array.isArray(body))
      return llamacppError(400, 'invalid_request_error', 'Request body must be an array');
    const next = this.parse(
      body,
      this.scales.map(() => 0),
    );
    if (typeof next === 'string') return llamacppError(500, 'server_error', next);
    this.scales = next;
    return { status: 200, body: { success: true } };
  }

  /**
   * The adapters a request runs with, by `llamaLora` mode (see LlamaLoraMode): several may be
   * active at once (common_set_adapter_lora passes every adapter with its scale, common/common.cpp,
   * llama.cpp b7193 and b10573); the engine sees them as one label, `path+path`. `clear`: server-task.cpp
   * params_from_json_cmpl (llama.cpp b7193, b7502); `empty-is-absent`: server-context.cpp launch_slot_with_task
   * and construct_lora_list (PR #18263, b7516; read at b7516, b10088 and b10573; llama.cpp issue 28674 reports it
   * at b10088); `listed-only`: not found upstream.
   */
  select(lora: unknown): { adapter: string | null; rank?: number } | string {
    let scales = this.scales;
    const mode = this.r.o.llamaLora;
    const absent = lora === undefined || (mode !== 'clear' && Array.isArray(lora) && lora.length === 0);
    if (!absent) {
      // Since PR #24150 (b9716) the field schema prefixes the text with the field's name (handle_with_catch,
      // server-schema.cpp, b10573).
      if (!Array.isArray(lora))
        return mode === 'clear' ? LORA_NOT_A_LIST : `Field 'lora': ${LORA_NOT_A_LIST}`;
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
   * `/slots` (get_slots, tools/server/server.cpp at llama.cpp b7193, server-context.cpp at b10573: 501 without
   * `--slots`); each slot's to_json
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
   * `[{id, scale}]` over `base`; a missing scale is 0 (parse_lora_request, server-common.cpp). An id the replica
   * does not have: "invalid adapter id" up to b7502 (mode `clear`; read at b7193, b7502); since PR #18263 (b7516)
   * parse_lora_request checks no id and construct_lora_list (server-context.cpp) skips it (read at b7516, b10573).
   */
  private parse(list: unknown[], base: number[]): number[] | string {
    const scales = [...base];
    for (const e of list as { id?: unknown; scale?: unknown }[]) {
      const id = e?.id;
      if (typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id >= scales.length) {
        if (this.r.o.llamaLora === 'clear') return 'invalid adapter id';
        continue;
      }
      scales[id] = typeof e.scale === 'number' ? e.scale : 0;
    }
    return scales;
  }
}

/** llama.cpp without `--metrics` (get_metrics: tools/server/server.cpp at llama.cpp b7193, server-context.cpp at b10573). */
export const metricsNotSupported = llamacppError(
  501,
  'not_supported_error',
  'This server does not support metrics endpoint. Start it with `--metrics`',
);
