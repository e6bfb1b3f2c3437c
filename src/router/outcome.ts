/**
 * What the request path takes in and gives back: the access phase's request, as Kong's PDK hands
 * it over, and the decision (answer it here, or proxy it with its lease). Apart from the service
 * (router.ts) because every step of the path answers in these terms (direct-answers.ts,
 * admission.ts), and they import it without importing the service.
 */
import type { Stage } from '../scheduler/types';
import type { SloHints } from './slo-class';

export interface RouteRequest {
  path: string;
  /** What `kong.request.get_raw_body()` returned (msgpack bin: a Uint8Array). */
  body: Uint8Array | string | null | undefined;
  /**
   * `kong.request.get_method()`, asked only where the method decides (`/v1/models`, or an
   * inference path without a body): a POST with a body costs no extra PDK call.
   */
  method?: () => Promise<string>;
  /**
   * The consumer Kong identified, if any: asked only when the request would start an adapter
   * load (the cold-load budget), so a resident adapter's request makes no PDK call for it.
   */
  consumer?: () => Promise<string | undefined>;
  /**
   * The request's class hints (its objective headers, its consumer): asked only with
   * `slo_classes` configured and for a path the router routes.
   */
  slo?: () => Promise<SloHints>;
}

export type RouteOutcome =
  | { kind: 'respond'; status: number; body: unknown; headers: Record<string, string> }
  | {
      kind: 'proxy';
      url: string;
      host: string;
      port: number;
      /** The replica is served over TLS: the Service's scheme must become https. */
      https: boolean;
      leaseId: string;
      stage: Stage;
      adapter: string | null;
      /** Rewritten body (llama.cpp: the adapter's `lora` field), if any. */
      body?: string;
      /** `saturation_mode: predicted`: the TTFT predicted on the chosen replica, ms. */
      predictedTtftMs?: number;
    };
