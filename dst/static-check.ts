/**
 * "Static adapters stay" (docs/reliability.md): no router unloads an adapter the replica
 * registered at its start (vLLM `--lora-modules`), read off the replica's own log: its unload
 * answered 200 for an entry registered so (AdapterLogEntry.static), never from the router's
 * classification. Nothing excuses it: the docs name no action that may unload a static adapter
 * (the router never does; an operator who wants it gone restarts the replica without it). Seeds
 * 362 and 408 broke it before the stores' first registry read after an emptied state told a
 * start-up adapter from a router's load by the name loaded, not by any load on the replica.
 */
import type { AdapterLogEntry } from '../sim/http/replica';

/** Why the entry breaks it (undefined: it does not). */
export function staticUnloaded(e: AdapterLogEntry, url: string): string | undefined {
  if (e.op !== 'unload' || e.status !== 200 || !e.static) return undefined;
  return `${e.name} (registered at ${url}'s start) unloaded at ${Math.round(e.at)} ms`;
}
