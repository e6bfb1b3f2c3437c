/**
 * vLLM's per-request `priority` (its OpenAI request body field; `--scheduling-policy priority`
 * serves waiting requests by (priority, arrival), lower first: PriorityRequestQueue,
 * vllm/v1/core/sched/request_queue.py, vLLM v0.11.0, v0.11.2, v0.19.0). A replica started without
 * that flag serves any value first come first served (V1 from vLLM PR #19057; only the V0 engine
 * refused, "Got priority 1 but Priority scheduling is not enabled."), so the router sets it only
 * when the operator says the replicas run it (`vllm_scheduling_policy: priority`).
 */

/** vLLM's priority for a request of class priority `classPriority` (higher goes first here, lower there). */
export function vllmPriority(classPriority: number): number {
  return classPriority === 0 ? 0 : -classPriority;
}

/**
 * The body to send with `priority` set to `priority`, or undefined when the client's body already
 * says it (absent means 0): no rewrite, no PDK call. The client's text (`ParsedBody.text`, decoded
 * once), with `"priority":N` added as the object's last member: parsed and serialised again, a seed
 * past 2^53 would change, `1.0` in a tool's schema (rendered into the prompt) become `1`,
 * integer-like keys be reordered. A client's own `priority` stays where it was and is overridden,
 * as vLLM reads a repeated key (Python's json, like JSON.parse, keeps the last), so it cannot put
 * itself ahead of its class.
 */
export function withVllmPriority(
  json: Record<string, unknown>,
  text: string,
  priority: number,
): string | undefined {
  const sent = json.priority;
  if (sent === priority || (sent === undefined && priority === 0)) return undefined;
  // It parsed as an object: its last `}` closes it (only whitespace may follow).
  const end = text.lastIndexOf('}');
  const member = `${Object.keys(json).length > 0 ? ',' : ''}"priority":${priority}`;
  return text.slice(0, end) + member + text.slice(end);
}
