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
  return warnings;
}
