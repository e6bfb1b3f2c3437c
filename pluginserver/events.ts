/**
 * What the project adds to kong-pdk 0.6.0's plugin server (node_modules/kong-pdk/server.js),
 * by wrapping an instance of it rather than forking it:
 *
 * - Events Kong will never step again are dropped. kong-pdk deletes an event only when a Step
 *   answers "ret"; Kong sends nothing more after `kong.response.exit` (the plugin's coroutine
 *   is yielded for good: Kong/kong 3.9.3 kong/pdk/response.lua `exit`, kong/init.lua), nor
 *   after a PDK call raised, nor for a HandleEvent answered "ret" at once. Each such event
 *   kept its pipe and handler state (about 1.3 KB of heap) forever.
 * - Instance ids never repeat across restarts. kong-pdk counts them from 0 in every process
 *   and sends no `serverPid` notification, so a Kong worker that cached an id from before a
 *   restart (plugin.lua `running_instances`) could run another plugin's instance with it.
 *   Ids start from the clock instead; an unknown id gets "no plugin instance", which makes
 *   Kong start a fresh one (mp_rpc.lua `Rpc:handle_event`).
 */
import { KONG_RPC_TIMEOUT_MS } from '../src/config/parse';

/** The parts of kong-pdk's `Server` this wraps. */
export interface KongPdkServer {
  instanceID: number;
  events: Map<number, unknown>;
  HandleEvent(event: unknown): Promise<StepReply>;
  Step(data: unknown): Promise<StepReply>;
  StepError(data: unknown): Promise<StepReply>;
  [method: string]: unknown;
}

interface StepReply {
  EventId: number;
  Data: 'ret' | { Method: string; Args?: unknown[] };
}

/** PDK calls after which Kong never steps the event (kong-pdk's own NON_RETURN_METHODS). */
const FINAL_METHODS = new Set(['kong.response.exit', 'kong.response.error']);

/** Kong's RPC gives up after nginx's 60 s socket read timeout: an event idle longer is dead. */
const EVENT_IDLE_MS = KONG_RPC_TIMEOUT_MS + 5_000;

/**
 * Applies both fixes to a kong-pdk Server. Every Step method Kong may call (Step, StepError,
 * StepMultiMap, Step<Entity>) goes through `server.step`, the one place kong-pdk 0.6.0 deletes an
 * event (server.js `step`); HandleEvent starts one.
 */
export function wrapServer(server: KongPdkServer): void {
  // First instance id: milliseconds since the epoch times 1000, below 2^53 (a Lua number holds it
  // exactly) until the year 2255. A restarted process starts above any id the previous one gave,
  // unless that one started more than 1000 instances per millisecond of its life.
  server.instanceID = Math.max(server.instanceID, Date.now() * 1000);
  const lastSeen = new Map<number, number>();
  const settle = (reply: StepReply): StepReply => {
    if (reply.Data === 'ret' || FINAL_METHODS.has(reply.Data.Method)) {
      server.events.delete(reply.EventId);
      lastSeen.delete(reply.EventId);
    } else lastSeen.set(reply.EventId, Date.now());
    return reply;
  };
  for (const name of ['HandleEvent', 'step']) {
    const original = server[name] as (...a: unknown[]) => Promise<StepReply>;
    server[name] = async (...args: unknown[]) => settle(await original.apply(server, args));
  }
  // An event whose PDK call raised in Kong is never stepped either: drop it after Kong gave up.
  const sweep = setInterval(() => {
    const cutoff = Date.now() - EVENT_IDLE_MS;
    for (const [id, seen] of lastSeen)
      if (seen < cutoff) {
        server.events.delete(id);
        lastSeen.delete(id);
      }
  }, 10_000);
  sweep.unref();
}
