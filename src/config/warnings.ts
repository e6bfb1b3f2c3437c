import { ACCESS_WAIT_BUDGET_MS, accessWorstMs } from './parse';
import type { RouterConfig } from './router-schema';

/** How many listed adapter names a warning spells out before "and N more". */
const NAMED = 5;

/**
 * What a valid lora-router configuration does that its author likely did not mean: said when
 * an instance starts (the plugin server's log, so Kong's error log) and by `npm start`.
 */
export function routerConfigWarnings(c: RouterConfig): string[] {
  const warnings: string[] = [];
  const onDemand = c.adapters.filter((a) => !a.static).map((a) => a.name);
  if (c.max_loaded_adapters === 0 && (onDemand.length > 0 || c.adapter_path_template !== undefined)) {
    const named =
      onDemand.slice(0, NAMED).join(', ') +
      (onDemand.length > NAMED ? ` and ${onDemand.length - NAMED} more` : '');
    const which = [
      named && `the listed on-demand adapters (${named})`,
      c.adapter_path_template !== undefined && 'any name adapter_path_template allows',
    ]
      .filter(Boolean)
      .join(' and ');
    warnings.push(
      `lora-router: max_loaded_adapters is 0: the router loads no adapter, so ${which} are served only where a replica already holds them; the others get 404 adapter_loading_disabled. Set max_loaded_adapters (at most the replicas' --max-cpu-loras) to load them on demand.`,
    );
  }
  // A lease is taken at admission, before the wait for room, the unload and the load: one
  // reclaimed by age meanwhile lets its adapter be unloaded under the request about to use it.
  const access = Math.min(accessWorstMs(c), ACCESS_WAIT_BUDGET_MS);
  if (c.max_loaded_adapters > 0 && c.lease_max_age_ms < access)
    warnings.push(
      `lora-router: lease_max_age_ms (${c.lease_max_age_ms}) is below the longest access phase this configuration allows (${access} ms: refresh, wait for room, unload, load): a request's lease may be reclaimed while it still waits for its adapter, which another request may then unload. Set lease_max_age_ms to ${access} or more.`,
    );
  return warnings;
}
