/**
 * Prometheus text exposition format (0.0.4: prometheus/common expfmt/expfmt.go `TextVersion` at
 * tag v0.62.0) parser. It runs on every poll of every replica,
 * so it walks the text once with indexOf, allocates label maps only for the families the
 * caller asks for, and never throws: a malformed line is counted and skipped, since one bad
 * line from a replica must not blind the router to the rest.
 */

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface ParseStats {
  samples: number;
  malformed: number;
}

/**
 * Calls `onSample` for each sample whose metric name passes `want` (all when omitted).
 * Returns counts of samples seen and malformed lines skipped.
 */
export function forEachSample(
  text: string,
  onSample: (name: string, labels: Record<string, string>, value: number) => void,
  want?: (name: string) => boolean,
): ParseStats {
  const stats: ParseStats = { samples: 0, malformed: 0 };
  const parsed: LabelsOut = { labels: EMPTY };
  const n = text.length;
  let pos = 0;
  while (pos < n) {
    let end = text.indexOf('\n', pos);
    if (end < 0) end = n;
    const lineStart = pos;
    pos = end + 1;
    // Skip leading blanks; blank lines and comments (# HELP, # TYPE, others) carry no sample.
    let i = lineStart;
    while (i < end && (text.charCodeAt(i) === 32 || text.charCodeAt(i) === 9)) i++;
    if (i >= end || text.charCodeAt(i) === 35 /* # */) continue;
    const nameStart = i;
    while (i < end && isNameChar(text.charCodeAt(i))) i++;
    if (i === nameStart) {
      stats.malformed++;
      continue;
    }
    const name = text.slice(nameStart, i);
    const wanted = want ? want(name) : true;
    let labels: Record<string, string> = EMPTY;
    if (text.charCodeAt(i) === 123 /* { */) {
      const after = parseLabels(text, i + 1, end, wanted, parsed);
      if (after < 0) {
        stats.malformed++;
        continue;
      }
      i = after;
      labels = parsed.labels;
    }
    // Value, then an optional timestamp (ignored).
    while (i < end && (text.charCodeAt(i) === 32 || text.charCodeAt(i) === 9)) i++;
    let vEnd = i;
    while (
      vEnd < end &&
      text.charCodeAt(vEnd) !== 32 &&
      text.charCodeAt(vEnd) !== 9 &&
      text.charCodeAt(vEnd) !== 13
    )
      vEnd++;
    const value = parseValue(text.slice(i, vEnd));
    if (value === undefined) {
      stats.malformed++;
      continue;
    }
    stats.samples++;
    if (wanted) onSample(name, labels, value);
  }
  return stats;
}

/** All samples, for tests and tools; the hot path uses `forEachSample` with a filter. */
export function parsePrometheus(text: string): { samples: Sample[]; stats: ParseStats } {
  const samples: Sample[] = [];
  const stats = forEachSample(text, (name, labels, value) => samples.push({ name, labels, value }));
  return { samples, stats };
}

const EMPTY: Record<string, string> = Object.freeze({}) as Record<string, string>;

interface LabelsOut {
  labels: Record<string, string>;
}

function isNameChar(c: number): boolean {
  // [a-zA-Z0-9_:]
  return (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57) || c === 95 || c === 58;
}

/** Parses `name="value",...}` from `i` into `out`; returns the index after `}` or -1. */
function parseLabels(text: string, i: number, end: number, keep: boolean, out: LabelsOut): number {
  const labels: Record<string, string> | null = keep ? {} : null;
  for (;;) {
    while (i < end && (text.charCodeAt(i) === 32 || text.charCodeAt(i) === 44)) i++; // spaces, commas
    if (i >= end) return -1;
    if (text.charCodeAt(i) === 125 /* } */) {
      out.labels = labels ?? EMPTY;
      return i + 1;
    }
    const keyStart = i;
    while (i < end && isNameChar(text.charCodeAt(i))) i++;
    if (i === keyStart || text.charCodeAt(i) !== 61 /* = */ || text.charCodeAt(i + 1) !== 34 /* " */)
      return -1;
    const key = text.slice(keyStart, i);
    i += 2;
    let value = '';
    let chunk = i;
    for (;;) {
      if (i >= end) return -1;
      const c = text.charCodeAt(i);
      if (c === 34) break;
      if (c === 92 /* \ */) {
        value += text.slice(chunk, i);
        const e = text.charCodeAt(i + 1);
        value += e === 110 ? '\n' : e === 92 ? '\\' : e === 34 ? '"' : '\\' + text[i + 1];
        i += 2;
        chunk = i;
        continue;
      }
      i++;
    }
    value += text.slice(chunk, i);
    i++;
    if (labels) labels[key] = value;
  }
}

function parseValue(s: string): number | undefined {
  if (s.length === 0) return undefined;
  switch (s) {
    case 'NaN':
      return NaN;
    case '+Inf':
    case 'Inf':
      return Infinity;
    case '-Inf':
      return -Infinity;
  }
  const v = Number(s);
  return Number.isNaN(v) ? undefined : v;
}
