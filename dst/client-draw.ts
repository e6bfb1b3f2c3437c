/**
 * What Kong meets around a routed request besides the replica's answer, drawn per request from a
 * stream of its own (seeds without it keep their schedules: dst/schedule.ts): a client that gives
 * up (Kong logs 499), a later plugin that answers after lora-router's access phase decided (a
 * proxy-cache hit, or request-termination's 503: source 'exit'), and the time the log phase's `kong.response.get_source()` round
 * trip takes. dst/request-routing.ts plays them; dst/replicas.ts `proxy` closes the upstream.
 */
import { seededRandom } from '../src/random';
import { dur, int } from './draws';
import type { Action } from './schedule';

/** A client that gives up on its request, and what the replica then sees. */
export interface GaveUp {
  /** ms after the request came. */
  afterMs: number;
  /**
   * Gone before proxying began (found only then: Kong leaves `lua_check_client_abort` off): nginx
   * closed the upstream connection before the request was written, so it never reached the replica.
   * Otherwise it was written and the close follows it.
   */
  unwritten: boolean;
  /**
   * ms from the close reaching the replica to its engine stopping the request: uvicorn's
   * `http.disconnect`, vLLM's `with_cancellation` cancelling the handler, `AsyncLLM.abort`, and the
   * engine core taking the abort between two steps (vLLM v0.11.0 vllm/entrypoints/utils.py,
   * vllm/v1/engine/async_llm.py `generate`, vllm/v1/engine/core.py `_process_input_queue`).
   */
  noticeMs: number;
}

/** The share of all seeds (quiet ones too) whose requests draw these. */
export const CLIENT_SHARE = 0.4;
/** Of a drawing seed's requests: the share whose client gives up, a later plugin answers, the source call takes time. */
const GAVE_UP_SHARE = 0.15;
const EXIT_SHARE = 0.1;
const SLOW_SOURCE_SHARE = 0.5;
/** Of the later plugins' answers: the share that are a 503 (request-termination in maintenance), not a cache hit. */
const EXIT_5XX_SHARE = 0.3;

/** Sets the draws on a share of the seeds' request actions (`actions` as drawn so far, in their order). */
export function drawClients(seed: number, actions: Action[]): void {
  const r = seededRandom(seed * 2654435761 + 15);
  if (r() >= CLIENT_SHARE) return;
  // A stream of its own, drawn only for the later plugins' answers: added after the draws above,
  // it moves none of them (a schedule without such an answer is the one it was).
  const exits = seededRandom(seed * 2654435761 + 17);
  for (const a of actions) {
    if (a.kind !== 'request') continue;
    // Every draw made for every request, so one request's draws never move another's.
    const gives = r() < GAVE_UP_SHARE;
    const gaveUp: GaveUp = { afterMs: dur(r, 0, 3000), unwritten: r() < 0.5, noticeMs: dur(r, 0, 500) };
    const exit = r() < EXIT_SHARE;
    const slow = r() < SLOW_SOURCE_SHARE;
    const sourceMs = int(r, 1, 300);
    if (gives) a.gaveUp = gaveUp;
    // A cache hit answers a request whose client is still there.
    else if (exit) {
      a.exit = true;
      if (exits() < EXIT_5XX_SHARE) a.exitStatus = 503;
    }
    if (slow) a.sourceMs = sourceMs;
  }
}
