/**
 * The placement page: replicas x adapters, saturation bars, recent loads and unloads, redrawn
 * every second from `<base>/status`. One self-contained document (no build step, no CDN).
 */
export function placementPage(base: string): string {
  const statusUrl = JSON.stringify(`${base}/status`);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>kong-lora-router · placement</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
  :root { --static:#6b7280; --loaded:#16a34a; --loading:#f59e0b; --unloading:#dc2626; --bg:#f8fafc; --ink:#0f172a; }
  * { box-sizing: border-box; }
  body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px; color: var(--ink); background: var(--bg); }
  h1 { font-size: 20px; margin: 0 0 4px; }
  .sub { color: #475569; margin-bottom: 16px; }
  table { border-collapse: collapse; background: #fff; }
  th, td { border: 1px solid #e2e8f0; padding: 4px 8px; text-align: center; white-space: nowrap; }
  th.replica { text-align: left; font-weight: 600; }
  td.cell { width: 56px; height: 28px; font-size: 12px; color: #fff; }
  td.static { background: var(--static); } td.loaded { background: var(--loaded); }
  td.loading { background: var(--loading); } td.unloading { background: var(--unloading); }
  .bar { width: 140px; height: 12px; background: #e2e8f0; border-radius: 6px; overflow: hidden; display: inline-block; vertical-align: middle; }
  .bar > span { display: block; height: 100%; background: #2563eb; }
  .bar.hot > span { background: #dc2626; }
  .down { color: #dc2626; font-weight: 600; }
  .nofig, .disagree { color: #b45309; }
  .legend span { display: inline-block; padding: 2px 8px; margin-right: 6px; color: #fff; border-radius: 4px; font-size: 12px; }
  section { margin-top: 20px; }
  #events td { text-align: left; font-size: 13px; }
  .ok { color: #16a34a; } .error { color: #dc2626; }
</style>
</head>
<body>
<h1>LoRA adapter placement</h1>
<div class="sub" id="summary">loading…</div>
<div class="legend"><span style="background:var(--static)">static</span><span style="background:var(--loaded)">loaded</span><span style="background:var(--loading)">loading</span><span style="background:var(--unloading)">unloading</span> cell text: requests in flight</div>
<section><table id="grid"></table></section>
<section><h2 style="font-size:16px">Recent loads and unloads</h2><table id="events"></table></section>
<script>
const STATUS = ${statusUrl};
const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
function render(s) {
  const names = [...new Set(s.replicas.flatMap((r) => r.adapters.map((a) => a.name).concat(r.llamaAdapters.map((a) => a.path))))].sort();
  document.getElementById('summary').textContent =
    s.replicas.length + ' replicas · ' + names.length + ' adapters resident · ' + s.inFlight + ' requests in flight · ' + s.poller.polls + ' polls (' + s.poller.errors + ' failed)' + (s.store === 'memory' ? '' : s.store === 'redis' ? ' · state shared in Redis' : ' · Redis unreachable: this node decides alone');
  let h = '<tr><th class="replica">replica</th><th>saturation</th><th>waiting / running</th>' + names.map((n) => '<th>' + esc(n) + '</th>').join('') + '</tr>';
  for (const r of s.replicas) {
    const by = Object.fromEntries(r.adapters.map((a) => [a.name, a]));
    for (const a of r.llamaAdapters) by[a.path] = { state: 'static', inFlight: 0 };
    const pct = Math.min(100, Math.round(r.saturation * 100));
    h += '<tr data-replica="' + esc(r.url) + '"><th class="replica">' + esc(r.url) + ' <small>' + esc(r.backend) + '</small>' +
      (r.health === 'down' ? ' <span class="down">down</span>' : '') +
      (r.loadFrom && r.loadFrom !== 'metrics' ? ' <small class="nofig" title="llama.cpp without --metrics: routed on in-flight counts">no load figures (' + esc(r.loadFrom) + ')</small>' : '') +
      (r.residency && r.residency.disagree.length ? ' <small class="disagree" title="held: ' + esc(r.residency.cpu.join(', ')) + '">registry and residency differ: ' + esc(r.residency.disagree.join(', ')) + '</small>' : '') + '</th>' +
      '<td><span class="bar' + (r.saturation >= 1 ? ' hot' : '') + '"><span style="width:' + pct + '%"></span></span> ' + r.saturation.toFixed(2) + '</td>' +
      '<td>' + r.waiting + ' / ' + r.running + '</td>' +
      names.map((n) => { const a = by[n]; return a ? '<td class="cell ' + a.state + '" data-adapter="' + esc(n) + '" data-state="' + a.state + '">' + (a.inFlight || '') + '</td>' : '<td data-adapter="' + esc(n) + '"></td>'; }).join('') + '</tr>';
  }
  document.getElementById('grid').innerHTML = h;
  document.getElementById('events').innerHTML = '<tr><th>when</th><th>what</th><th>adapter</th><th>replica</th><th>took</th><th>detail</th></tr>' +
    s.events.filter((e) => e.op === 'load' || e.op === 'unload' || e.op.startsWith('replica')).slice(0, 20).map((e) =>
      '<tr class="event" data-op="' + e.op + '"><td>' + (e.ageMs / 1000).toFixed(1) + ' s ago</td><td class="' + e.result + '">' + e.op + ' ' + e.result + '</td><td>' + esc(e.adapter) +
      '</td><td>' + esc(e.url) + '</td><td>' + (e.ms === undefined ? '' : Math.round(e.ms) + ' ms') + '</td><td>' + esc(e.detail || '') + '</td></tr>').join('');
}
async function tick() {
  try { render(await (await fetch(STATUS, { cache: 'no-store' })).json()); }
  catch (e) { document.getElementById('summary').textContent = 'status unavailable: ' + e; }
  setTimeout(tick, 1000);
}
tick();
</script>
</body>
</html>
`;
}
