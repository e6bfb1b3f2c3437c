import { KeyedLock } from '../../src/keyed-lock';
import type { SimError } from './errors';
import type { RegistryEntry, ReplicaContext } from './context';

/**
 * vLLM's runtime LoRA API and filesystem resolver, as `OpenAIServingModels` answers them
 * (vllm/entrypoints/openai/serving_models.py; see docs/replica-apis.md for the versions).
 */
export class VllmLoraApi {
  /** vLLM's per-name `lora_resolver_lock`: loads, unloads and resolutions of one name queue (main; not re-read at a pinned commit). */
  private readonly locks = new KeyedLock();
  /**
   * `lora_id_counter`: a load of a name not in the registry takes the next `lora_int_id`, so a name
   * loaded again after an unload is a new engine key, read from storage again (`load_lora_adapter`:
   * vllm 075e9ba825 serving_models.py; vllm 00153c8b79 openai/models/serving.py; the Rust
   * frontend's `LoraManager::load_lora`, rust/src/server/src/lora.rs, vllm 0a44ad5bdb).
   */
  private nextLoraId = 1;

  constructor(private readonly r: ReplicaContext) {}

  private get rust(): boolean {
    return this.r.o.vllmFrontend === 'rust';
  }

  /** The engine key of a newly loaded copy of `name`'s weights. */
  newWeights(name: string): string {
    return `${name}#${this.nextLoraId++}`;
  }

  async load(body: unknown): Promise<SimError> {
    const { r } = this;
    const started = r.clock.now();
    const b = (body instanceof Error ? {} : (body ?? {})) as Record<string, unknown>;
    const name = typeof b.lora_name === 'string' ? b.lora_name : '';
    const path = typeof b.lora_path === 'string' ? b.lora_path : '';
    const logged = (res: SimError): SimError => {
      r.log.push({
        at: r.clock.now(),
        op: 'load',
        name,
        path,
        status: res.status,
        ms: r.clock.now() - started,
        loaded: r.registry.runtimeCount(),
        wallMs: Date.now(),
      });
      return res;
    };
    // FastAPI validates the body first: a missing or non-string field is a pydantic 400 (see validationError).
    const missing = ['lora_name', 'lora_path'].filter((k) => typeof b[k] !== 'string');
    if (missing.length > 0) return logged(validationError(r, missing, b));
    // _check_load_lora_adapter_request (serving_models.py, vLLM v0.11.0), as the "already loaded" 400 below.
    if (!name || !path) {
      return logged(r.error(400, 'InvalidUserInput', "Both 'lora_name' and 'lora_path' must be provided."));
    }
    return this.locks.run(name, async () => {
      const main = r.o.loadErrors === 'main';
      const existing = r.registry.get(name);
      if (existing && this.rust && b.load_inplace !== true)
        return logged(
          rustError(
            400,
            `LoRA adapter \`${name}\` is already loaded. If you want to load the adapter in place, set 'load_inplace' to true.`,
            'lora_name',
          ),
        );
      if (existing && !(main && b.load_inplace === true)) {
        const hint = main ? " If you want to load the adapter in place, set 'load_inplace' to True." : '';
        return logged(
          r.error(400, 'InvalidUserInput', `The lora adapter '${name}' has already been loaded.${hint}`),
        );
      }
      const rank = adapterRank(r, path);
      // LoRAAdapterNotFoundError's text (vllm/exceptions.py, v0.19.0; on main a shim to
      // vllm/foundation/system/exceptions.py, vllm 055e47c280), which load_lora_adapter answers
      // 404 NotFoundError: any "No adapter found" at v0.11.0 and v0.11.2 (serving_models.py,
      // prefixed), since #36201 that exception's own text, unprefixed (openai/models/serving.py at
      // v0.19.0 and vllm 00153c8b79).
      if (rank === undefined)
        return logged(
          engineFailure(r, 404, 'NotFoundError', `Loading lora ${name} failed: No adapter found for ${path}`),
        );
      // PEFTHelper.validate_legal's text (vllm/lora/peft_helper.py, vLLM v0.11.0; WorkerLoRAManager._load_lora's
      // in vllm/lora/worker_manager.py at vllm 9495bf0d33). Since
      // vLLM #36201 (v0.18.0 by its release window; vllm/entrypoints/openai/models/serving.py
      // `load_lora_adapter`, read at v0.19.0 and main 00153c8b79) any engine failure but "not
      // found" answers 500 InternalServerError.
      if (rank > r.o.maxLoraRank) {
        const main = r.o.loadErrors === 'main';
        return logged(
          engineFailure(
            r,
            main ? 500 : 400,
            main ? 'InternalServerError' : 'BadRequestError',
            `LoRA rank ${rank} is greater than max_lora_rank ${r.o.maxLoraRank}.`,
          ),
        );
      }
      // load_inplace keeps the name's lora_int_id (and so its cache entry).
      const weights = existing?.weights ?? this.newWeights(name);
      const epoch = r.bootCount();
      try {
        await r.engine.loadWeights(weights, rank);
      } catch (err) {
        return logged(
          engineFailure(
            r,
            500,
            'InternalServerError',
            `Loading lora ${name} failed: ${(err as Error).message}`,
          ),
        );
      }
      if (epoch !== r.bootCount()) {
        return logged(r.error(500, 'InternalServerError', `Loading lora ${name} failed: replica restarted`));
      }
      const fault = r.takeLoadFault();
      if (fault !== undefined) {
        // Checked after the load time: a real failure costs the time too.
        return logged(
          r.error(
            fault,
            fault >= 500 ? 'InternalServerError' : 'BadRequestError',
            `Loading lora ${name} failed: simulated fault`,
          ),
        );
      }
      r.registry.set(name, { name, path, rank, static: false, created: Math.floor(r.nowUnix()), weights });
      return logged({ status: 200, body: `Success: LoRA adapter '${name}' added successfully.` });
    });
  }

  unload(body: unknown): SimError {
    const { r } = this;
    const b = (body instanceof Error ? {} : (body ?? {})) as Record<string, unknown>;
    const name = typeof b.lora_name === 'string' ? b.lora_name : '';
    const logged = (
      res: SimError,
      busy?: { running: number; waiting: number },
      registeredAtStart = false,
    ): SimError => {
      r.log.push({
        at: r.clock.now(),
        op: 'unload',
        name,
        status: res.status,
        ms: 0,
        ...(busy ? { inFlight: busy.running + busy.waiting, ...busy } : {}),
        ...(registeredAtStart ? { static: true as const } : {}),
        loaded: r.registry.runtimeCount(),
        wallMs: Date.now(),
      });
      return res;
    };
    if (!name)
      return logged(
        r.error(400, 'InvalidUserInput', "'lora_name' needs to be provided to unload a LoRA adapter."),
      );
    const entry = r.registry.get(name);
    if (!entry && this.rust) return logged(rustModelNotFound(name));
    if (!entry) return logged(r.error(404, 'NotFoundError', `The lora adapter '${name}' cannot be found.`));
    // What the engine has of the name at this moment: the fault run's invariant reads it (never > 0).
    const busy = r.engine.requestsOf(name);
    r.registry.delete(name);
    // The Python frontend through 0.27.x only forgets the name (unload_lora_adapter: vllm 075e9ba825; quoted at
    // 0.27.2rc0 c0adee9231 in vllm#54839): the weights stay cached until the LRU pushes them out. `frees`: the
    // engine's remove_lora too (the Rust frontend; the Python one on main, vllm 00153c8b79).
    if (r.o.unload === 'frees') r.engine.dropWeights(entry.weights);
    return logged(
      { status: 200, body: `Success: LoRA adapter '${name}' removed successfully.` },
      busy,
      entry.static,
    );
  }

  /**
   * The filesystem resolver (vllm/plugins/lora_resolvers/filesystem_resolver.py), active with
   * `VLLM_ALLOW_RUNTIME_LORA_UPDATING` and `VLLM_LORA_RESOLVER_CACHE_DIR` unless `VLLM_PLUGINS`
   * is set without it (unset, vllm/plugins/__init__.py loads every plugin):
   * `<dir>/<name>` whose adapter_config.json names the served model as its base. It loads the
   * weights eagerly, under the name's lock, before the request queues. Found but not loadable:
   * 400; not found: the caller's 404.
   */
  async resolve(name: string): Promise<RegistryEntry | SimError | undefined> {
    const { r } = this;
    if (!r.o.resolverDir || !r.o.runtimeLoading) return undefined;
    const path = `${r.o.resolverDir.replace(/\/$/, '')}/${name}`;
    const rank = adapterRank(r, path);
    if (rank === undefined || (r.o.adapterBaseModels[path] ?? r.o.baseModel) !== r.o.baseModel)
      return undefined;
    return this.locks.run(name, async () => {
      const known = r.registry.get(name);
      if (known) return known;
      const started = r.clock.now();
      // Logged as loads: the simulator's log counts every read of an adapter's weights by a call.
      const log = (status: number) =>
        r.log.push({
          at: r.clock.now(),
          op: 'load',
          name,
          path,
          status,
          ms: r.clock.now() - started,
          loaded: r.registry.runtimeCount(),
          wallMs: Date.now(),
        });
      const weights = this.newWeights(name);
      if (rank > r.o.maxLoraRank) {
        log(400);
        return r.error(400, 'BadRequestError', `LoRA adapter '${name}' was found but could not be loaded.`);
      }
      await r.engine.loadWeights(weights, rank);
      const entry = { name, path, rank, static: false, created: Math.floor(r.nowUnix()), weights };
      r.registry.set(name, entry);
      log(200);
      return entry;
    });
  }
}

/** The rank of the adapter at `path`, or undefined if there is none. */
export function adapterRank(r: ReplicaContext, path: string): number | undefined {
  const o = r.o;
  if (path in o.adapterPaths) return o.adapterPaths[path];
  for (const a of o.staticAdapters) if (a.path === path) return a.rank ?? o.defaultRank;
  for (const dir of o.adapterDirs) {
    const d = dir.endsWith('/') ? dir : dir + '/';
    const rest = path.startsWith(d) ? path.slice(d.length) : '';
    const named = /^[A-Za-z0-9._-]+$/.test(rest) && rest !== '.' && rest !== '..';
    if (named && (o.adapterDirHolds === undefined || o.adapterDirHolds.test(rest))) return o.defaultRank;
  }
  return undefined;
}

/**
 * A failure raised inside the engine: released vLLM wraps its text in the utility call's ("Call to add_lora method
 * failed: ", EngineCoreProc._handle_client_request, vllm/v1/engine/core.py, vLLM v0.11.0); any such failure is a
 * 400, or a 404 when the text has "No adapter found" (load_lora_adapter, serving_models.py, vLLM v0.11.0).
 */
function engineFailure(r: ReplicaContext, status: number, type: string, message: string): SimError {
  const text = r.o.loadErrors === 'released' ? `Call to add_lora method failed: ${message}` : message;
  return r.error(status, type, text);
}

/**
 * FastAPI's RequestValidationError as vLLM's handler answers it: 400, type "Bad Request" (HTTPStatus.BAD_REQUEST.phrase,
 * validation_exception_handler in vllm/entrypoints/serve/utils/server_utils.py, vLLM main, December 2026, registered by
 * api_server.py, main). That version words the message "N validation error(s): ..."; the `[{...}]` list of
 * pydantic's errors here is the older `str(exc.errors())` form, not read at a pinned commit.
 */
function validationError(r: ReplicaContext, missing: string[], input: Record<string, unknown>): SimError {
  const errs = missing.map(
    (k) =>
      `{'type': 'missing', 'loc': ('body', '${k}'), 'msg': 'Field required', 'input': ${JSON.stringify(input)}}`,
  );
  return r.error(400, 'Bad Request', `[${errs.join(', ')}]`);
}

/**
 * The Rust frontend's `ApiError` bodies (rust/src/server/src/error.rs, vllm 00d4191780):
 * `invalid_request_error`, its code the type again, for the LoRA routes' own refusals
 * (routes/lora.rs).
 */
function rustError(status: number, message: string, param: string | null): SimError {
  return {
    status,
    body: { error: { message, type: 'invalid_request_error', param, code: 'invalid_request_error' } },
  };
}

/** The Rust frontend's unload of a name it does not hold: `ApiError::model_not_found` (routes/lora.rs). */
function rustModelNotFound(name: string): SimError {
  return {
    status: 404,
    body: {
      error: {
        message: `The model \`${name}\` does not exist.`,
        type: 'invalid_request_error',
        param: 'model',
        code: 'model_not_found',
      },
    },
  };
}
