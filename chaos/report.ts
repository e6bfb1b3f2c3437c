import type { ChaosReport } from './run';

/** The run as text: the world, the schedule, each invariant's checks and violations. */
export function formatReport(r: ChaosReport, examples = 5): string {
  const w = r.world;
  const lines = [
    `randomized fault run: seed ${r.seed}, ${(r.trafficMs / 60_000).toFixed(1)} min of traffic`,
    `  ${w.nodes} Kong nodes, ${w.replicas} vLLM replicas x ${w.maxLoadedAdapters} adapter slots, ${w.adapters} adapters, ${w.clients} clients, cold_loads_per_minute ${w.coldLoadsPerMinute}, poll ${w.pollIntervalMs} ms`,
    `  requests: ${r.traffic.sent} sent, by status ${JSON.stringify(r.traffic.byStatus)}; well-formed answered 404 by the replica: ${r.traffic.replica404}`,
    `  refusals: ${JSON.stringify(r.traffic.refusals)}`,
    `  seen by the replicas, by sender: ${r.witness.requests} proxied requests, ${r.witness.asks} /metrics asks and ${r.witness.unloads} unload calls from a node, ${r.witness.unattributed} from none`,
    `schedule (${r.schedule.length} faults):`,
    ...r.schedule.map(
      (s) =>
        `  +${((s.appliedAt - r.startedAt) / 1000).toFixed(1).padStart(6)} s  ${s.text} (healed +${((s.healedAt - r.startedAt) / 1000).toFixed(1)} s)`,
    ),
    `settled (every node back on Redis): ${r.settled ? 'yes' : 'NO'}`,
    ...r.statusProblems.map((p) => `  status route failed: ${p}`),
    `plugin servers died: ${r.deaths.length === 0 ? 'none' : r.deaths.map((d) => `node ${d.node}`).join(', ')}`,
    `stray rejections logged: ${r.strays.map((l, i) => `node ${i}: ${l.length}`).join(', ')}`,
    ...r.strays.flatMap((l, i) => l.slice(0, 3).map((line) => `  node ${i}: ${line.slice(0, 300)}`)),
    'invariants:',
  ];
  for (const [i, inv] of r.invariants.entries()) {
    lines.push(
      `  (${['i', 'ii', 'iii', 'iv'][i] ?? i + 1}) ${inv.name}: ${inv.checks} checks, ${inv.violations.length} violations`,
    );
    const inOrder = [...inv.violations].sort((a, b) => (a.at ?? 0) - (b.at ?? 0));
    for (const v of inOrder.slice(0, examples)) {
      const at = v.at !== undefined ? `+${((v.at - r.startedAt) / 1000).toFixed(1)} s ` : '';
      const where = [v.replica, v.adapter].filter(Boolean).join(' ');
      lines.push(`      ${at}${where ? where + ': ' : ''}${v.detail}`);
      const near = faultsNear(r, v.at, v.until);
      if (near) lines.push(`        faults then: ${near}`);
      for (const e of replicaCallsNear(r, v.replica, v.at, v.until)) lines.push(`        ${e}`);
    }
    if (inv.violations.length > examples) lines.push(`      ... ${inv.violations.length - examples} more`);
    const excusedUnloads = inv.excusedUnloads ?? [];
    if (excusedUnloads.length > 0)
      lines.push(
        `      excused: ${excusedUnloads.length} busy unloads, each an unseen router's first request of the adapter (the window docs/reliability.md leaves open):`,
      );
    for (const v of [...excusedUnloads].sort((a, b) => (a.at ?? 0) - (b.at ?? 0)).slice(0, examples)) {
      const at = v.at !== undefined ? `+${((v.at - r.startedAt) / 1000).toFixed(1)} s ` : '';
      lines.push(`        ${at}${[v.replica, v.adapter].filter(Boolean).join(' ')}: ${v.detail}`);
    }
    if (inv.excused?.stretches)
      lines.push(
        `      excused: ${inv.excused.stretches} stretches over the limit while a node decided alone or a fault was under way (longest ${inv.excused.longestMs} ms)`,
      );
  }
  const b = r.budgetWithResets;
  lines.push(`  (not an invariant) ${b.name}: ${b.checks} checks, ${b.violations.length} violations`);
  if (!r.ok)
    for (const [i, notices] of r.notices.entries()) {
      // The last lines: a long run goes wrong, if it does, towards its end.
      const total = notices.length + (r.noticesDropped[i] ?? 0);
      lines.push(`node ${i} log (${total} lines, the last ${Math.min(notices.length, 4 * examples)}):`);
      for (const l of notices.slice(-4 * examples)) lines.push(`  ${l.slice(0, 200)}`);
    }
  for (const d of r.deaths) {
    lines.push(
      `node ${d.node}: plugin server DIED at +${((d.at - r.startedAt) / 1000).toFixed(1)} s (exit code ${d.code}, signal ${d.signal}); its last ${d.lastLines.length} lines:`,
    );
    const near = faultsNear(r, d.at - AFTERMATH_MS, d.at);
    if (near) lines.push(`  faults then: ${near}`);
    for (const l of d.lastLines) lines.push(`  | ${l}`);
  }
  const strays = r.strays.reduce((n, l) => n + l.length, 0);
  if (r.deaths.length > 0) lines.push(`result: FAILED, ${r.deaths.length} plugin server(s) died`);
  else if (strays > 0) lines.push(`result: FAILED, ${strays} stray rejection(s) logged`);
  else lines.push(r.ok ? 'result: every invariant held' : 'result: VIOLATED');
  return lines.join('\n');
}

/** How long after a fault healed a violation may still be its consequence (a poll, a node TTL). */
const AFTERMATH_MS = 5000;

/** The faults in effect over [at, until], or healed at most AFTERMATH_MS before it. */
function faultsNear(r: ChaosReport, at?: number, until?: number): string {
  if (at === undefined) return '';
  const end = until ?? at;
  return r.schedule
    .filter((f) => f.appliedAt <= end && f.healedAt + AFTERMATH_MS >= at)
    .map((f) => `+${((f.appliedAt - r.startedAt) / 1000).toFixed(1)} s ${f.text}`)
    .join('; ');
}

/** The replica's loads and unloads from a second before a violation to half a second after it. */
function replicaCallsNear(r: ChaosReport, replica?: string, at?: number, until?: number): string[] {
  if (replica === undefined || at === undefined) return [];
  const end = (until ?? at) + 500;
  return r.replicaLog
    .filter(
      (e) => e.replica === replica && e.wallMs !== undefined && e.wallMs >= at - 1000 && e.wallMs <= end,
    )
    .map(
      (e) =>
        `| +${((e.wallMs! - r.startedAt) / 1000).toFixed(3)} s ${e.op} ${e.name} ${e.status} in ${Math.round(e.ms)} ms` +
        (e.loaded !== undefined ? `, ${e.loaded} loaded after` : '') +
        (e.op === 'unload' ? `, ${e.running ?? 0} running ${e.waiting ?? 0} waiting` : ''),
    );
}
