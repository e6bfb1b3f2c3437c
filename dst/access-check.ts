/**
 * "A request is sent or refused within its access bound": every wait of an access phase ends by
 * the bound the configuration is checked against (src/config/parse.ts `accessWorstMs`: a refresh,
 * `queue_timeout_ms` for room, an unload and a load), which stays within Kong's 60 s RPC to the
 * plugin server. Holds are part of the room wait: a request held in the gateway (its objective
 * predicted missed everywhere, a class behind a held higher one, a sheddable class delayed, a class
 * at its `max_in_flight`) is held no longer than `queue_timeout_ms` from its arrival (room-wait.ts
 * `holdUntil`). A request that needs no load (the base model, a static adapter) has no unload or
 * load to wait for. Judged from what the client and the replica saw: when the answer came (the
 * request proxied, or refused), not the router's own counts. A refusal for overload (503
 * `ttft_overload`, `shed_low_priority`) is OpenAI's error with `Retry-After`.
 */
import { accessWorstMs } from '../src/config/parse';
import type { RouterConfig } from '../src/config/router-schema';
import { POLL_MS, SEEN_SLACK_MS } from './world-timings';

export const ACCESS_INVARIANT = 'a request is sent or refused within its access bound';

/**
 * What an access phase may take past its configured bound in a world with nothing changing: its
 * calls to Redis and the replicas, and a decision made again on the next poll round's news.
 */
export const ACCESS_SLACK_MS = POLL_MS + SEEN_SLACK_MS;

/** One request as the client saw it answered. */
export interface AccessAnswer {
  began: number;
  /** ms from its arrival to the answer (proxied to a replica, or refused). */
  took: number;
  /** It named the base model or a static adapter: no load, no unload made for it. */
  needsNoLoad: boolean;
  /** Time its calls spent on a slow path (dst/replicas.ts `slowPath`): the network's, not the router's. */
  slowMs: number;
}

/** What of the world the judgement reads. */
export interface AccessScope {
  /** When the last fault began or healed. */
  lastFaultAt: number;
  /** When the last `redis` record change reached its last node. */
  lastRecordChange: number;
}

/** The longest access phase `config` allows a request, its slack included. */
export function accessBoundMs(
  config: Pick<RouterConfig, 'room_wait' | 'refresh_timeout_ms' | 'queue_timeout_ms' | 'load_timeout_ms'>,
  needsNoLoad: boolean,
): number {
  const worst = accessWorstMs(config) - (needsNoLoad ? 2 * config.load_timeout_ms : 0);
  return worst + ACCESS_SLACK_MS;
}

/**
 * Why the answer came past the bound, or undefined. Only a request during which nothing changed
 * is judged: a fault (Redis's, a link's, a replica's) or a record change may hold a decision on
 * timeouts and retries the bound does not count.
 */
export function answeredLate(
  a: AccessAnswer,
  config: Parameters<typeof accessBoundMs>[0],
  w: AccessScope,
): string | undefined {
  if (w.lastFaultAt >= a.began || w.lastRecordChange >= a.began) return undefined;
  const bound = accessBoundMs(config, a.needsNoLoad);
  const took = a.took - a.slowMs;
  if (took <= bound) return undefined;
  return `answered ${Math.round(took)} ms after it came (queue_timeout_ms ${config.queue_timeout_ms}, bound ${bound} ms${a.needsNoLoad ? ', no load' : ''})`;
}

/** Why a refusal for overload is not OpenAI's error with `Retry-After`, or undefined. */
export function refusalMalformed(
  status: number,
  body: unknown,
  headers: Record<string, string>,
): string | undefined {
  const e = (body as { error?: { message?: unknown; type?: unknown; code?: unknown } } | undefined)?.error;
  if (typeof e?.message !== 'string' || typeof e.type !== 'string' || typeof e.code !== 'string')
    return `a ${status} refusal without OpenAI's error body`;
  const after = Number(headers['Retry-After']);
  if (!Number.isInteger(after) || after < 1) return `a ${status} ${e.code} refusal without Retry-After`;
  return undefined;
}
