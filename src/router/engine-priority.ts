/**
 * vLLM's per-request `priority` (its OpenAI request body field; `--scheduling-policy priority`
 * serves waiting requests by (priority, arrival), lower first: PriorityRequestQueue,
 * vllm/v1/core/sched/request_queue.py). A replica started without that flag refuses any value
 * but 0 ("Got priority 1 but Priority scheduling is not enabled."), so the router sets it only
 * when the operator says the replicas run it (`vllm_scheduling_policy: priority`).
 */
import { errors } from '../errors';

/** vLLM's priority for a request of class priority `classPriority` (higher goes first here, lower there). */
export function vllmPriority(classPriority: number): number {
  return classPriority === 0 ? 0 : -classPriority;
}

/**
 * The body to send with `priority` set to `priority`, or undefined when the client's body already
 * says it (absent means 0): no rewrite, no PDK call. A client's own value is replaced, so it
 * cannot put itself ahead of its class.
 */
export function withVllmPriority(json: Record<string, unknown>, priority: number): string | undefined {
  const sent = json.priority;
  if (sent === priority || (sent === undefined && priority === 0)) return undefined;
  try {
    return JSON.stringify({ ...json, priority });
  } catch {
    // V8 parses nesting it cannot serialise again.
    throw errors.badRequest('The request body is nested too deeply.', 'invalid_json');
  }
}
