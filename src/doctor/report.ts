import type { ReplicaCheck } from './check';

/** The check of one replica as lines of text: the doctor's output and lora-poller's start-up log. */
export function replicaLines(c: ReplicaCheck): string[] {
  const lines: string[] = [];
  const what = c.backend === 'unknown' ? 'unknown backend' : c.backend;
  lines.push(
    `${c.url}: ${c.fit ? 'fit' : 'UNFIT'} (${what}${c.version ? ` ${c.version}` : ', version not reported'}${c.rustFrontend ? ', Rust frontend' : ''})`,
  );
  if (!c.reachable) {
    for (const f of c.findings) lines.push(`  ${f.level}: ${f.text}`);
    return lines;
  }
  if (c.backend === 'vllm') {
    lines.push(`  runtime LoRA API: ${c.runtimeLora ? 'on' : 'off'}`);
    lines.push(
      `  --max-loras: ${c.maxLoras ?? 'not reported'}; max_loaded_adapters: ${c.maxLoadedAdapters ?? 'not given'}; prefix caching: ${c.prefixCaching === undefined ? 'not reported' : c.prefixCaching ? 'on' : 'off'}; API servers: ${c.apiServers ?? 1}`,
    );
  }
  for (const s of c.signals)
    lines.push(
      s.exported ? `  signal ${s.id}: exported` : `  signal ${s.id}: MISSING (${s.source}): ${s.without}`,
    );
  if (c.tryLoad) {
    const t = c.tryLoad;
    lines.push(
      t.outcome === 'loaded and unloaded'
        ? `  try-load ${t.adapter}: loaded in ${Math.round(t.loadMs!)} ms, unloaded in ${Math.round(t.unloadMs!)} ms`
        : `  try-load ${t.adapter}: ${t.outcome}${t.error ? `: ${t.error}` : ''}`,
    );
  }
  for (const f of c.findings) lines.push(`  ${f.level}: ${f.text}`);
  return lines;
}

/** The whole fleet: every replica, then the verdict the exit status carries. */
export function fleetReport(checks: readonly ReplicaCheck[]): { text: string; fit: boolean } {
  const fit = checks.length > 0 && checks.every((c) => c.fit);
  const unfit = checks.filter((c) => !c.fit).length;
  const lines = checks.flatMap(replicaLines);
  lines.push(
    fit
      ? `fleet: fit (${checks.length} replica${checks.length === 1 ? '' : 's'})`
      : `fleet: UNFIT (${unfit} of ${checks.length} replica${checks.length === 1 ? '' : 's'})`,
  );
  return { text: lines.join('\n') + '\n', fit };
}
