/**
 * What the router answers itself, before any routing: the model list (`/v1/models`, one card of
 * it), and refusals of the replicas' management paths, of a method a path does not take and of
 * a request longer than the context of every replica that could serve it.
 */
import type { AdapterCatalog, Resolved } from '../adapters/catalog';
import { errors } from '../errors';
import type { ReplicaView } from '../fleet/types';
import type { FleetRuntime } from '../runtime';
import { canServe } from '../scheduler/filters/eligibility';
import { isHolder } from '../scheduler/pipeline';
import type { TokenEstimate } from '../work/estimate';
import { modelList } from './model-list';
import { allowedMethods, classifyPath, modelIdOf, type PathClass } from './request';
import type { RouteOutcome, RouteRequest } from './outcome';

/** What the model list is built from: one router configuration's fleet. */
export interface ModelFleet {
  baseModel: string | undefined;
  catalog: AdapterCatalog;
  urls: readonly string[];
  /** Whether the configuration loads adapters on demand (max_loaded_adapters > 0). */
  loads: boolean;
}

/** `/v1/models` and `/v1/models/{id}` (the SDK's `models.retrieve`): the fleet's list, or one card of it. */
export async function answerModels(
  rt: FleetRuntime,
  path: string,
  cls: 'models' | 'model',
  fleet: ModelFleet,
): Promise<RouteOutcome> {
  const list = modelList(fleet.baseModel, fleet.catalog, await rt.store.dump(), fleet.urls, fleet.loads);
  let body: unknown = list;
  if (cls === 'model') {
    const id = modelIdOf(path);
    body = list.data.find((m) => m.id === id);
    if (body === undefined) throw errors.modelNotFound(id);
  }
  return { kind: 'respond', status: 200, body, headers: { 'Content-Type': 'application/json' } };
}

/**
 * Refuses up front a request longer than the context of every replica that could serve its
 * model (vLLM would answer 400 on each): only when each of those has reported its
 * `max_model_len`. One that reports none (llama.cpp) may have room: it gets the request and
 * answers for itself. Health is not asked: a replica down now may come back with room.
 */
export function checkContext(
  rt: FleetRuntime,
  t: TokenEstimate,
  resolved: Resolved,
  views: ReplicaView[],
  maxLoadedAdapters: number,
): void {
  // Without max_tokens vLLM refuses a prompt that fills the context (serving_engine.py
  // `_validate_input`): it needs one token of room, as the eligibility filter counts.
  const need = t.longestPromptTokens + (t.maxTokens ?? 1);
  const lens = rt.poller.maxModelLen;
  if (lens.size === 0) return; // no replica reported its context: none can refuse
  let max = 0;
  let serving = 0;
  for (const v of views) {
    if (!canServe(resolved.kind, { holder: isHolder(v), backend: v.backend }, maxLoadedAdapters)) continue;
    const len = lens.get(v.url);
    if (len === undefined || need <= len) return;
    serving++;
    if (len > max) max = len;
  }
  if (serving > 0) throw errors.contextLengthExceeded(max, t.longestPromptTokens, t.maxTokens);
}

/** Refuses the replicas' management paths, and methods a path does not take. */
export async function checkPath(req: RouteRequest): Promise<PathClass> {
  const cls = pathClassNow(req);
  if (cls !== undefined) return cls;
  const path = classifyPath(req.path);
  const allow = allowedMethods(path)!;
  const method = (await req.method!()).toUpperCase();
  if (!allow.includes(method)) throw errors.methodNotAllowed(method, allow);
  return path;
}

/**
 * `checkPath` without a PDK call: the path's class, the management paths refused, or undefined
 * where the method decides (`/v1/models`, an inference path without a body): then `checkPath`.
 * A POST with a body, every request's case, awaits nothing.
 */
export function pathClassNow(req: RouteRequest): PathClass | undefined {
  const cls = classifyPath(req.path);
  if (cls === 'admin') {
    throw errors.forbidden('This path manages the replicas and is not available through the gateway.');
  }
  const allow = allowedMethods(cls);
  const bodyless = req.body === undefined || req.body === null || req.body.length === 0;
  return allow && req.method && (cls === 'models' || cls === 'model' || bodyless) ? undefined : cls;
}
