/**
 * What a replica's own report says of its adapters, as the router must read it: vLLM writes
 * `running_lora_adapters` and `waiting_lora_adapters` as the names joined with `,`, so a label
 * carrying a name with a comma (`team,a`) reads as running each name it spells (`team`, `a`), and
 * the reverse (docs/reliability.md, "A name with a comma is never read as idle"). The router
 * unloads only what the report reads idle: an excess read busy that way stays until it reads idle
 * (seed 111053).
 */

/** A replica's registry and engine now: runtime-loaded adapters, and those with requests running or waiting. */
export interface EngineWord {
  loaded: readonly string[];
  running: readonly string[];
  waiting: readonly string[];
}

/**
 * Whether a replica past `max` holds fewer idle adapters its report reads idle than its excess,
 * some idle one being read busy through a label of other names: the trim cannot reach the excess
 * yet. An excess really busy (its own requests running) is no excuse here.
 */
export function excessReadBusy(max: number, w: EngineWord): boolean {
  const labels = [w.running, w.waiting].map((names) => `,${names.join(',')},`);
  const active = new Set([...w.running, ...w.waiting]);
  const idle = w.loaded.filter((n) => !active.has(n));
  const readIdle = idle.filter((n) => !labels.some((l) => l.includes(`,${n},`)));
  return readIdle.length < idle.length && readIdle.length < w.loaded.length - max;
}
