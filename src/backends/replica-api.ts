import type { ReplicaLoad } from '../metrics/replica-load';
import type { LlamaAdapter, ReplicaSpec } from '../fleet/types';

/** The result of a load call that did not throw. */
export type LoadOutcome = 'loaded' | 'already-loaded';
export type UnloadOutcome = 'unloaded' | 'absent';

export interface Scrape {
  load: ReplicaLoad;
  registry?: { name: string; path: string }[];
  llamaAdapters?: LlamaAdapter[];
  /** vLLM: the base model card's `max_model_len` in /v1/models; absent when not reported. */
  maxModelLen?: number;
}

/** What a replica reports of its own work, read afresh right before an unload. */
export interface ReplicaActivity {
  /** Adapters with requests running or waiting there; undefined when the replica cannot say. */
  busy?: string[];
}

/**
 * What the routing core asks of replicas. The HTTP implementation talks to vLLM and
 * llama.cpp; the discrete-event benchmark implements it on top of the engine model.
 * Failures throw BackendError (or AdapterNotFoundError for a path with no adapter).
 */
export interface ReplicaApi {
  scrape(replica: ReplicaSpec, timeoutMs: number): Promise<Scrape>;
  loadAdapter(url: string, name: string, path: string, timeoutMs: number): Promise<LoadOutcome>;
  unloadAdapter(url: string, name: string, timeoutMs: number): Promise<UnloadOutcome>;
  /**
   * A fresh read of what the replica is running (vLLM `/metrics`), asked only on the unload path.
   * Throws BackendError when the replica does not answer. An implementation without it (the
   * benchmark's engine model, whose leases are exact) leaves unloads to the lease rules.
   * `names`: the adapters asked about; one the report cannot carry unambiguously (vLLM joins
   * names with `,`) is listed busy whenever the report may be naming it.
   */
  activity?(url: string, timeoutMs: number, names?: readonly string[]): Promise<ReplicaActivity>;
  /**
   * A fresh read of the adapters the replica holds (vLLM `/v1/models`), asked only on the load
   * path before a load into a slot the router believes free; undefined when the replica cannot
   * list them. Throws BackendError when the replica does not answer.
   */
  residency?(url: string, timeoutMs: number): Promise<{ name: string; path: string }[] | undefined>;
  /** Drops what is kept of `url` between calls (a replica that left). Optional: none kept. */
  forget?(url: string): void;
}

/** The replica has no adapter at that path: the client's problem (unknown adapter), not the replica's. */
export class AdapterNotFoundError extends Error {
  override readonly name = 'AdapterNotFoundError';
}

/** The replica cannot load this adapter as asked (a 400 other than "already loaded"): the client's problem. */
export class AdapterRejectedError extends Error {
  override readonly name = 'AdapterRejectedError';
}
