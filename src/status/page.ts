/**
 * The placement page, redrawn every second from `<base>/status`: headline figures with small
 * charts over the last minutes, then one row per replica with its resident adapters as chips
 * (so 64 replicas and hundreds of adapters stay readable), filterable by adapter name, and
 * the recent loads and unloads. One self-contained document (no build step, no CDN). It fetches
 * its data with the query string it was opened with, so a key given there (`?apikey=`) reaches
 * the status route too.
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
  :root { --static:#64748b; --loaded:#15803d; --loading:#d97706; --unloading:#b91c1c; --bg:#f8fafc; --ink:#0f172a; --mute:#64748b; --line:#e2e8f0; }
  * { box-sizing: border-box; }
  body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 20px 24px; color: var(--ink); background: var(--bg); }
  h1 { font-size: 20px; margin: 0 0 2px; }
  h2 { font-size: 15px; margin: 18px 0 6px; }
  .sub { color: var(--mute); margin-bottom: 12px; }
  #cards { display: grid; grid-template-columns: repeat(6, minmax(150px, 1fr)); gap: 10px; }
  .card { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 8px 10px; }
  .card .label { color: var(--mute); font-size: 12px; }
  .card .value { font-size: 22px; font-weight: 600; font-variant-numeric: tabular-nums; }
  .card svg { display: block; width: 100%; height: 30px; }
  .card polyline { fill: none; stroke: #2563eb; stroke-width: 1.5; vector-effect: non-scaling-stroke; }
  .card.bad polyline { stroke: #dc2626; }
  .card circle { fill: #2563eb; } .card.bad circle { fill: #dc2626; }
  #window { color: var(--mute); font-size: 12px; margin-top: 4px; }
  .tools { display: flex; gap: 14px; align-items: center; flex-wrap: wrap; margin: 14px 0 8px; }
  #filter { font: inherit; padding: 5px 8px; width: 260px; border: 1px solid #cbd5e1; border-radius: 6px; }
  .legend .chip { cursor: default; }
  table { border-collapse: collapse; background: #fff; width: 100%; }
  th, td { border-bottom: 1px solid var(--line); padding: 2px 8px; text-align: left; vertical-align: middle; }
  thead th { position: sticky; top: 0; background: #f1f5f9; font-size: 12px; color: #334155; z-index: 1; }
  td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
  td.replica { white-space: nowrap; font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12.5px; }
  td.replica small { color: var(--mute); font-family: system-ui, sans-serif; }
  .health { display: inline-block; min-width: 64px; text-align: center; padding: 1px 6px; border-radius: 10px; font-size: 12px; color: #fff; }
  .health.up { background: #16a34a; } .health.stale { background: #d97706; } .health.down { background: #dc2626; } .health.nometrics { background: #64748b; }
  .bar { width: 90px; height: 10px; background: var(--line); border-radius: 5px; overflow: hidden; display: inline-block; vertical-align: middle; margin-right: 6px; }
  .bar > span { display: block; height: 100%; background: #2563eb; }
  .bar.hot > span { background: #dc2626; }
  td.chips { line-height: 1.75; }
  .chip { display: inline-block; padding: 0 7px; margin: 1px 3px 1px 0; border-radius: 10px; font-size: 12px; color: #fff; white-space: nowrap; line-height: 1.6; }
  .chip i { font-style: normal; background: rgba(255,255,255,.3); border-radius: 8px; padding: 0 5px; margin-left: 4px; }
  .chip.static { background: var(--static); } .chip.loaded { background: var(--loaded); }
  .chip.loading { background: var(--loading); } .chip.unloading { background: var(--unloading); }
  .chip.match { outline: 2px solid #1d4ed8; outline-offset: 1px; }
  .none { color: var(--mute); font-size: 12px; }
  #events td { font-size: 13px; }
  .nofig, .disagree { color: #b45309; }
  .ok { color: #16a34a; } .error { color: #dc2626; }
</style>
</head>
<body>
<h1>LoRA adapter placement</h1>
<div class="sub" id="summary">loading…</div>
<div id="cards"></div>
<div id="window"></div>
<div class="tools">
  <input id="filter" type="search" placeholder="filter by adapter name (e.g. cust-1)" autocomplete="off">
  <span id="matches" class="none"></span>
  <span class="legend"><span class="chip static">static</span><span class="chip loaded">loaded</span><span class="chip loading">loading</span><span class="chip unloading">unloading</span> <span class="none">the number on a chip: requests in flight</span></span>
</div>
<table id="grid"><thead><tr><th>replica</th><th>health</th><th>saturation</th><th class="num">waiting / running</th><th class="num">in flight</th><th>resident adapters</th></tr></thead><tbody></tbody></table>
<h2>Recent loads and unloads</h2>
<table id="events"></table>
<script>
const STATUS = ${statusUrl};
const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
const natural = new Intl.Collator('en', { numeric: true }).compare;
const fmt = (x, d = 0) => (x === null || Number.isNaN(x) ? '–' : x.toFixed(d));

// Small charts: one point per history bucket, scaled to the series' own maximum.
function spark(values, max) {
  const top = max ?? Math.max(1e-9, ...values.filter((v) => v !== null));
  const n = values.length;
  const pts = values.map((v, i) => v === null ? null : (i / (n - 1)) * 100 + ',' + (32 - (v / top) * 30).toFixed(1)).filter(Boolean);
  // The latest point also as a dot: a lone point draws no line.
  const end = pts.at(-1);
  return '<svg viewBox="0 0 100 34" preserveAspectRatio="none"><polyline points="' + pts.join(' ') + '"/>' +
    (end ? '<circle cx="' + end.split(',')[0] + '" cy="' + end.split(',')[1] + '" r="1.6"/>' : '') + '</svg>';
}
function cards(h) {
  const b = h.buckets;
  const perMin = 60000 / h.bucketMs;
  const last = b.slice(-Math.round(perMin));
  const sum = (xs, k) => xs.reduce((a, x) => a + x[k], 0);
  const hit = (xs) => { const r = sum(xs, 'requests'); return r ? Math.max(0, 1 - sum(xs, 'loads') / r) : null; };
  const loadMs = (xs) => { const l = sum(xs, 'loads'); return l ? sum(xs, 'loadMs') / l : null; };
  const card = (id, label, value, series, max, bad) =>
    '<div class="card' + (bad ? ' bad' : '') + '" data-card="' + id + '"><div class="label">' + label + '</div><div class="value">' + value + '</div>' + spark(series, max) + '</div>';
  return [
    card('requests', 'requests / min', sum(last, 'requests'), b.map((x) => x.requests * perMin)),
    card('hit-rate', 'hit rate (1 − loads / requests)', hit(last) === null ? '–' : fmt(hit(last) * 100) + ' %', b.map((x) => hit([x])), 1),
    card('loads', 'adapter loads / min', sum(last, 'loads'), b.map((x) => x.loads * perMin)),
    card('unloads', 'unloads / min', sum(last, 'unloads'), b.map((x) => x.unloads * perMin)),
    card('refusals', 'refusals / min (503 / 429)', sum(last, 'refusals'), b.map((x) => x.refusals * perMin), undefined, sum(last, 'refusals') > 0),
    card('load-time', 'mean load time', loadMs(last) === null ? '–' : fmt(loadMs(last)) + ' ms', b.map((x) => loadMs([x]))),
  ].join('');
}
function windowNote(h) {
  return 'Figures: the last minute on this node. Charts: the last ' + Math.round(h.buckets.length * h.bucketMs / 60000) + ' minutes, one point per ' + h.bucketMs / 1000 + ' s.';
}

function chipsOf(r) {
  const chips = r.adapters.map((a) => ({ name: a.name, state: a.state, inFlight: a.inFlight, title: a.state + (a.inFlight ? ' · ' + a.inFlight + ' in flight' : '') + ' · idle ' + (a.idleMs / 1000).toFixed(1) + ' s' }));
  for (const a of r.llamaAdapters) chips.push({ name: a.name ?? a.path.slice(a.path.lastIndexOf('/') + 1), state: 'static', inFlight: 0, title: 'static (started with ' + a.path + ')' });
  return chips.sort((x, y) => natural(x.name, y.name));
}

function render(s) {
  const q = document.getElementById('filter').value.trim().toLowerCase();
  const replicas = [...s.replicas].sort((a, b) => natural(a.url, b.url));
  const names = new Set(replicas.flatMap((r) => chipsOf(r).map((c) => c.name)));
  const count = (st) => replicas.filter((r) => r.state === st).length;
  document.getElementById('summary').textContent =
    replicas.length + ' replicas (' + count('up') + ' up' + (count('stale') ? ', ' + count('stale') + ' stale' : '') + (count('down') ? ', ' + count('down') + ' down' : '') + (count('no metrics') ? ', ' + count('no metrics') + ' without metrics' : '') + ') · ' +
    names.size + ' distinct adapters resident · ' + s.inFlight + ' requests in flight · ' + s.poller.polls + ' polls (' + s.poller.errors + ' failed)' +
    (s.store === 'memory' ? '' : s.store === 'redis' ? ' · state shared in Redis' : ' · Redis unreachable: this node decides alone');
  if (s.history) {
    document.getElementById('cards').innerHTML = cards(s.history);
    document.getElementById('window').textContent = windowNote(s.history);
  }
  let rows = '';
  let shown = 0;
  for (const r of replicas) {
    const chips = chipsOf(r);
    const hits = q ? chips.filter((c) => c.name.toLowerCase().includes(q)) : chips;
    if (q && hits.length === 0) continue;
    shown++;
    const pct = Math.min(100, Math.round(r.saturation * 100));
    const st = r.state ?? r.health;
    rows += '<tr data-replica="' + esc(r.url) + '" data-state="' + esc(st) + '">' +
      '<td class="replica">' + esc(r.url) + ' <small>' + esc(r.backend) + '</small>' +
      (r.loadFrom && r.loadFrom !== 'metrics' ? ' <small class="nofig" title="llama.cpp without --metrics: routed on in-flight counts">no load figures (' + esc(r.loadFrom) + ')</small>' : '') +
      (r.residency && r.residency.disagree.length ? ' <small class="disagree" title="held: ' + esc(r.residency.cpu.join(', ')) + '">registry and residency differ: ' + esc(r.residency.disagree.join(', ')) + '</small>' : '') + '</td>' +
      '<td><span class="health ' + esc(st.replace(' ', '')) + '" title="' + esc(r.lastError || (r.snapshotAgeMs === null ? 'never polled' : 'polled ' + (r.snapshotAgeMs / 1000).toFixed(1) + ' s ago')) + '">' + esc(st) + '</span></td>' +
      '<td class="num" style="text-align:left" title="' + (r.saturationMode === 'predicted' ? 'predicted wait over that of the fastest other replica plus a load and saturation_margin_ms' : 'max(waiting / target_waiting_per_replica, kv usage / kv_ceiling)') + '" data-mode="' + esc(r.saturationMode || 'count') + '"><span class="bar' + (r.saturation >= 1 ? ' hot' : '') + '"><span style="width:' + pct + '%"></span></span>' + r.saturation.toFixed(2) + '</td>' +
      '<td class="num">' + r.waiting + ' / ' + r.running + '</td><td class="num">' + r.inFlight + '</td>' +
      '<td class="chips">' + (chips.length ? chips.map((c) => {
        const m = q && c.name.toLowerCase().includes(q);
        if (q && !m) return '';
        return '<span class="chip ' + esc(c.state) + (m ? ' match' : '') + '" data-adapter="' + esc(c.name) + '" data-state="' + esc(c.state) + '" title="' + esc(c.title) + '">' + esc(c.name) + (c.inFlight ? '<i>' + c.inFlight + '</i>' : '') + '</span>';
      }).join('') + (q && hits.length < chips.length ? '<span class="none">+' + (chips.length - hits.length) + ' more</span>' : '') : '<span class="none">none</span>') + '</td></tr>';
  }
  document.querySelector('#grid tbody').innerHTML = rows;
  document.getElementById('matches').textContent = q ? shown + ' of ' + replicas.length + ' replicas hold a match' : '';
  document.getElementById('events').innerHTML = '<tr><th>when</th><th>what</th><th>adapter</th><th>replica</th><th>took</th><th>detail</th></tr>' +
    s.events.filter((e) => e.op === 'load' || e.op === 'unload' || e.op.startsWith('replica')).slice(0, 15).map((e) =>
      '<tr class="event" data-op="' + esc(e.op) + '"><td>' + (e.ageMs / 1000).toFixed(1) + ' s ago</td><td class="' + esc(e.result) + '">' + esc(e.op) + ' ' + esc(e.result) + '</td><td>' + esc(e.adapter) +
      '</td><td>' + esc(e.url) + '</td><td>' + (e.ms === undefined ? '' : Math.round(e.ms) + ' ms') + '</td><td>' + esc(e.detail || '') + '</td></tr>').join('');
}
let last = null;
async function tick() {
  // The credential the page was opened with: its query string (key-auth reads \`apikey\` there,
  // Kong/kong 3.9.3 kong/plugins/key-auth/handler.lua, key_in_query default true) and the
  // browser's own (cookies, basic auth: same origin). A refusal says so instead of breaking render.
  try {
    const res = await fetch(STATUS + location.search, { cache: 'no-store', credentials: 'same-origin' });
    if (!res.ok) throw new Error('HTTP ' + res.status + (res.status === 401 || res.status === 403 ? ' (open this page with ?apikey=<an operator key>)' : ''));
    render((last = await res.json()));
  }
  catch (e) { document.getElementById('summary').textContent = 'status unavailable: ' + e; }
  setTimeout(tick, 1000);
}
document.getElementById('filter').addEventListener('input', () => last && render(last));
tick();
</script>
</body>
</html>
`;
}
