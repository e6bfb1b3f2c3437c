/** Markdown tables and SVG line charts for bench/results/ (no dependencies, no browser). */
import type { PolicyResult } from './des/run';

export function table(header: string[], rows: (string | number)[][]): string {
  const cell = (v: string | number) => (typeof v === 'number' ? fmtCount(v) : v);
  return [
    `| ${header.join(' | ')} |`,
    `|${header.map((_, i) => (i === 0 ? '---' : '--:')).join('|')}|`,
    ...rows.map((r) => `| ${r.map(cell).join(' | ')} |`),
  ].join('\n');
}

export function fmtNum(v: number): string {
  if (Number.isNaN(v)) return '-';
  if (!Number.isFinite(v)) return '∞';
  if (Math.abs(v) >= 100) return Math.round(v).toLocaleString('en-US');
  if (Math.abs(v) >= 10) return v.toFixed(1);
  return v.toFixed(2);
}

export function ms(v: number): string {
  if (Number.isNaN(v)) return '-';
  if (!Number.isFinite(v)) return '∞';
  return v >= 1000 ? `${(v / 1000).toFixed(2)} s` : `${Math.round(v)} ms`;
}

/** A count, or a mean of counts. */
export function fmtCount(v: number): string {
  return Number.isInteger(v) ? v.toLocaleString('en-US') : fmtNum(v);
}

/** A share as a percentage with one decimal: 0.987 -> 98.7%. */
export function fmtPct(v: number): string {
  return `${(v * 100).toFixed(1)}%`;
}

export function fmtRatio(v: number): string {
  return Number.isFinite(v) ? `${v.toFixed(2)}×` : fmtNum(v);
}

export function mean(xs: number[]): number {
  return xs.reduce((a, b) => a + b, 0) / xs.length;
}

/** "mean (min–max)" across seeds; the value alone for one seed. */
export function spread(xs: number[], f: (v: number) => string): string {
  return xs.length > 1 ? `${f(mean(xs))} (${f(Math.min(...xs))}–${f(Math.max(...xs))})` : f(xs[0]!);
}

/** Each reported metric of a policy run: how to read it from a result, how to print it. */
export const METRICS = {
  slo: [(r) => (r.sloAttainment ?? NaN) * 100, (v) => (Number.isNaN(v) ? '-' : `${v.toFixed(1)}%`)],
  loads: [(r) => r.loads, fmtNum],
  hitRate: [(r) => r.hitRate * 100, (v) => (Number.isNaN(v) ? '-' : `${v.toFixed(1)}%`)],
  beladyRatio: [(r) => (r.belady === undefined ? NaN : r.loads / r.belady), fmtRatio],
  pinnedRatio: [(r) => (r.pinnedBelady === undefined ? NaN : r.loads / r.pinnedBelady), fmtRatio],
  ttftP50: [(r) => r.ttftP50, ms],
  ttftP99: [(r) => r.ttftP99, ms],
  ttftP99Served: [(r) => r.ttftP99Served, ms],
  e2eP99: [(r) => r.e2eP99, ms],
  throughput: [(r) => r.throughput, (v) => v.toFixed(2)],
  errors: [(r) => r.errors, fmtCount],
  busyUnloads: [(r) => r.busyUnloads, fmtNum],
} satisfies Record<string, [(r: PolicyResult) => number, (v: number) => string]>;

/** A policy's metrics across runs, as table cells. */
export function cells(
  runs: { results: PolicyResult[] }[],
  name: string,
  keys: (keyof typeof METRICS)[],
): string[] {
  return keys.map((k) => spread(across(runs, name, METRICS[k][0]), METRICS[k][1]));
}

/** One policy's figure in each run. */
export function across(
  runs: { results: PolicyResult[] }[],
  name: string,
  f: (r: PolicyResult) => number,
): number[] {
  return runs.map((x) => {
    const r = x.results.find((y) => y.policy === name);
    if (!r) throw new Error(`no result for ${name}`);
    return f(r);
  });
}

export interface Series {
  name: string;
  points: [number, number][];
}

const COLORS = [
  '#2563eb',
  '#dc2626',
  '#16a34a',
  '#9333ea',
  '#ea580c',
  '#0891b2',
  '#4b5563',
  '#ca8a04',
  '#db2777',
  '#65a30d',
  '#7c2d12',
  '#000000',
];

/** A line chart: x linear, y linear or log10, one line per series, legend on the right. */
export function lineChart(o: {
  title: string;
  xLabel: string;
  yLabel: string;
  series: Series[];
  logY?: boolean;
  xFormat?: (x: number) => string;
  /** A fixed linear y range (e.g. 0-100 for a percentage); default from the data. */
  yRange?: [number, number];
}): string {
  const W = 760;
  const H = 420;
  const L = 70;
  const R = 230;
  const T = 40;
  const B = 50;
  const pts = o.series.flatMap((s) => s.points).filter(([, y]) => Number.isFinite(y) && (!o.logY || y > 0));
  const xs = pts.map(([x]) => x);
  const ys = pts.map(([, y]) => (o.logY ? Math.log10(y) : y));
  const x0 = Math.min(...xs);
  const x1 = Math.max(...xs);
  let y0 = o.yRange ? o.yRange[0] : o.logY ? Math.floor(Math.min(...ys)) : 0;
  let y1 = o.yRange ? o.yRange[1] : o.logY ? Math.ceil(Math.max(...ys)) : Math.max(...ys) * 1.05;
  if (y1 === y0) {
    y1 += 1;
    y0 -= o.logY ? 1 : 0;
  }
  const px = (x: number) => L + ((x - x0) / (x1 - x0 || 1)) * (W - L - R);
  const py = (y: number) => T + (1 - ((o.logY ? Math.log10(y) : y) - y0) / (y1 - y0)) * (H - T - B);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="#fff"/>`,
    `<text x="${L}" y="22" font-size="15" font-weight="bold">${esc(o.title)}</text>`,
  ];
  const yTicks = o.logY
    ? range(y0, y1).map((e) => 10 ** e)
    : range(0, 5).map((i) => y0 + ((y1 - y0) * i) / 5);
  for (const t of yTicks) {
    const y = py(t);
    out.push(`<line x1="${L}" y1="${y}" x2="${W - R}" y2="${y}" stroke="#e5e7eb"/>`);
    out.push(
      `<text x="${L - 6}" y="${y + 4}" text-anchor="end">${esc(o.logY ? tickLog(t) : fmtNum(t))}</text>`,
    );
  }
  for (const x of [...new Set(xs)].sort((a, b) => a - b)) {
    out.push(
      `<text x="${px(x)}" y="${H - B + 18}" text-anchor="middle">${esc(o.xFormat ? o.xFormat(x) : String(x))}</text>`,
    );
  }
  out.push(`<line x1="${L}" y1="${H - B}" x2="${W - R}" y2="${H - B}" stroke="#111"/>`);
  out.push(`<line x1="${L}" y1="${T}" x2="${L}" y2="${H - B}" stroke="#111"/>`);
  out.push(`<text x="${(L + W - R) / 2}" y="${H - 10}" text-anchor="middle">${esc(o.xLabel)}</text>`);
  out.push(
    `<text transform="translate(16 ${(T + H - B) / 2}) rotate(-90)" text-anchor="middle">${esc(o.yLabel)}</text>`,
  );
  o.series.forEach((s, i) => {
    const c = COLORS[i % COLORS.length];
    const p = s.points.filter(([, y]) => Number.isFinite(y) && (!o.logY || y > 0));
    if (p.length)
      out.push(
        `<polyline fill="none" stroke="${c}" stroke-width="2" points="${p.map(([x, y]) => `${px(x).toFixed(1)},${py(y).toFixed(1)}`).join(' ')}"/>`,
      );
    for (const [x, y] of p)
      out.push(`<circle cx="${px(x).toFixed(1)}" cy="${py(y).toFixed(1)}" r="3" fill="${c}"/>`);
    const ly = T + 10 + i * 20;
    out.push(
      `<line x1="${W - R + 15}" y1="${ly}" x2="${W - R + 35}" y2="${ly}" stroke="${c}" stroke-width="3"/>`,
    );
    out.push(`<text x="${W - R + 40}" y="${ly + 4}">${esc(s.name)}</text>`);
  });
  out.push('</svg>');
  return out.join('\n') + '\n';
}

function range(a: number, b: number): number[] {
  const out: number[] = [];
  for (let i = a; i <= b; i++) out.push(i);
  return out;
}

function tickLog(v: number): string {
  if (v >= 1000) return `${v / 1000} s`;
  return `${v} ms`;
}

function esc(s: string): string {
  return s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);
}
