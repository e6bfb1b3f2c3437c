/**
 * Prometheus text exposition format (0.0.4: prometheus/common expfmt/expfmt.go `TextVersion` at
 * tag v0.62.0) parser. It runs on every poll of every replica, so it walks the text once with
 * indexOf, allocates nothing for a line the caller does not ask for (a name is cut from the text
 * only when its length is one a wanted name has), builds label maps only for the families whose
 * labels the caller reads, and never throws: a malformed line is counted and skipped, since one
 * bad line from a replica must not blind the router to the rest.
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
 * Which samples the caller wants: a test of the name (true: with its labels), or, on the hot path,
 * a map from each wanted name to whether its labels are read (false: the sample comes with no labels).
 */
export type SampleFilter = ((name: string) => boolean) | ReadonlyMap<string, boolean>;

/**
 * Calls `onSample` for each sample whose metric name passes `want` (all when omitted).
 * Returns counts of samples seen and malformed lines skipped: every line is checked whole,
 * wanted or not.
 */
export function forEachSample(
  text: string,
  onSample: (name: string, labels: Record<string, string>, value: number) => void,
  want?: SampleFilter,
): ParseStats {
  let samples = 0;
  let malformed = 0;
  const byName = want instanceof Map ? (want as ReadonlyMap<string, boolean>) : undefined;
  const test = typeof want === 'function' ? want : undefined;
  const lengths = byName ? nameLengths(byName) : undefined;
  const parsed: LabelsOut = { labels: EMPTY };
  const slashes = { at: -1 };
  const n = text.length;
  let pos = 0;
  while (pos < n) {
    let end = text.indexOf('\n', pos);
    if (end < 0) end = n;
    const lineStart = pos;
    pos = end + 1;
    // Skip leading blanks; blank lines and comments (# HELP, # TYPE, others) carry no sample.
    let i = lineStart;
    let c = text.charCodeAt(i);
    while (i < end && (c === 32 || c === 9)) c = text.charCodeAt(++i);
    if (i >= end || c === 35 /* # */) continue;
    const nameStart = i;
    while (i < end && isNameChar(text.charCodeAt(i))) i++;
    if (i === nameStart) {
      malformed++;
      continue;
    }
    let name = '';
    let wanted: boolean;
    let withLabels = true;
    if (lengths) {
      const len = i - nameStart;
      wanted = len < lengths.length && lengths[len] === true;
      if (wanted) {
        name = text.slice(nameStart, i);
        const l = byName!.get(name);
        wanted = l !== undefined;
        withLabels = l === true;
      }
    } else {
      name = text.slice(nameStart, i);
      wanted = test ? test(name) : true;
    }
    let labels: Record<string, string> = EMPTY;
    if (text.charCodeAt(i) === 123 /* { */) {
      const after = parseLabels(text, i + 1, end, wanted && withLabels, parsed, slashes);
      if (after < 0) {
        malformed++;
        continue;
      }
      i = after;
      labels = parsed.labels;
    }
    // Value, then an optional timestamp (ignored).
    c = text.charCodeAt(i);
    while (i < end && (c === 32 || c === 9)) c = text.charCodeAt(++i);
    let vEnd = i;
    while (vEnd < end && c !== 32 && c !== 9 && c !== 13) c = text.charCodeAt(++vEnd);
    const value = parseValue(text, i, vEnd);
    if (value === undefined) {
      malformed++;
      continue;
    }
    samples++;
    if (wanted) onSample(name, labels, value);
  }
  return { samples, malformed };
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

/** By length, whether some wanted name has it (a filter's, worked out once per map). */
const lengthsOf = new WeakMap<ReadonlyMap<string, boolean>, boolean[]>();

function nameLengths(byName: ReadonlyMap<string, boolean>): boolean[] {
  let lengths = lengthsOf.get(byName);
  if (!lengths) {
    lengths = [];
    for (const name of byName.keys()) lengths[name.length] = true;
    lengthsOf.set(byName, lengths);
  }
  return lengths;
}

/** [a-zA-Z0-9_:] by char code. */
const NAME_CHAR = new Uint8Array(128);
for (let c = 0; c < 128; c++)
  NAME_CHAR[c] =
    (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57) || c === 95 || c === 58 ? 1 : 0;

function isNameChar(c: number): boolean {
  return c < 128 && NAME_CHAR[c] === 1;
}

/**
 * Parses `name="value",...}` from `i` into `out` (a map only when `keep`: a line not read is
 * checked, not copied); returns the index after `}` or -1. `slashes.at` is the first `\` at or
 * after where it was last looked for (the text's length when none is left): a value's closing
 * quote is found with indexOf and, unless a backslash comes first, is the one that ends it.
 */
function parseLabels(
  text: string,
  i: number,
  end: number,
  keep: boolean,
  out: LabelsOut,
  slashes: { at: number },
): number {
  const labels: Record<string, string> | null = keep ? {} : null;
  for (;;) {
    let c = text.charCodeAt(i);
    while (i < end && (c === 32 || c === 44)) c = text.charCodeAt(++i); // spaces, commas
    if (i >= end) return -1;
    if (c === 125 /* } */) {
      out.labels = labels ?? EMPTY;
      return i + 1;
    }
    const keyStart = i;
    while (i < end && isNameChar(text.charCodeAt(i))) i++;
    if (i === keyStart || text.charCodeAt(i) !== 61 /* = */ || text.charCodeAt(i + 1) !== 34 /* " */)
      return -1;
    const keyEnd = i;
    i += 2;
    const valueStart = i;
    let quote = text.indexOf('"', i);
    if (slashes.at < i) slashes.at = nextSlash(text, i);
    const escaped = slashes.at < quote;
    if (escaped) quote = closingQuote(text, i, end);
    if (quote < 0 || quote >= end) return -1;
    if (labels)
      labels[text.slice(keyStart, keyEnd)] = escaped
        ? unescape(text, valueStart, quote)
        : text.slice(valueStart, quote);
    i = quote + 1;
  }
}

function nextSlash(text: string, from: number): number {
  const at = text.indexOf('\\', from);
  return at < 0 ? text.length : at;
}

/** The quote that ends a value with escapes in it, before `end`, or -1. */
function closingQuote(text: string, i: number, end: number): number {
  while (i < end) {
    const c = text.charCodeAt(i);
    if (c === 34) return i;
    i += c === 92 /* \ */ ? 2 : 1;
  }
  return -1;
}

/** A label value with its escapes (`\n`, `\\`, `\"`; any other `\x` stays as written). */
function unescape(text: string, from: number, to: number): string {
  let value = '';
  let chunk = from;
  for (let i = from; i < to; ) {
    if (text.charCodeAt(i) !== 92) {
      i++;
      continue;
    }
    value += text.slice(chunk, i);
    const e = text.charCodeAt(i + 1);
    value += e === 110 ? '\n' : e === 92 ? '\\' : e === 34 ? '"' : '\\' + text[i + 1];
    i += 2;
    chunk = i;
  }
  return value + text.slice(chunk, to);
}

/** `0.0` and `1.0`, most of a replica's values, without cutting a string for `Number`. */
function parseValue(text: string, from: number, to: number): number | undefined {
  const len = to - from;
  if (len === 0) return undefined;
  if (len === 3 && text.charCodeAt(from + 1) === 46 /* . */ && text.charCodeAt(from + 2) === 48 /* 0 */) {
    const d = text.charCodeAt(from) - 48;
    if (d >= 0 && d <= 9) return d;
  }
  const s = text.slice(from, to);
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
