import { seededRandom, type Random } from '../../src/random';

/**
 * Prompt text that a real tokenizer counts as it counts agent and RAG traffic: English prose
 * (instructions, retrieved passages), code blocks and JSON tool results, mixed in sections of a
 * few hundred to a couple of thousand characters. One corpus is generated once from a fixed seed
 * and every prompt is a window of it at an offset of its own (wrapping round), so memory stays
 * bounded by the corpus whatever the workload's length, and the same offset gives the same text.
 */
export const CORPUS_CHARS = 1 << 19;

/** Of the corpus's sections: prose, code, JSON (by count, drawn per section). */
export const TEXT_MIX = { prose: 0.6, code: 0.2, json: 0.2 };

const WORDS = (
  'the of and to a in is that for it as with was on be by this are or from at which an not but ' +
  'have has had can will would should may must also more most other some such only new first two ' +
  'time use used using data model request requests replica replicas adapter adapters cache memory ' +
  'latency token tokens prompt prompts answer user system service server client network load ' +
  'queue batch context document documents section report policy result results value values ' +
  'customer account order payment invoice product price shipping delivery support ticket issue ' +
  'error errors status update change changes version release build test tests deploy cluster ' +
  'region storage database query index table record field schema question summary analysis risk ' +
  'team project plan meeting week month year report because however therefore although while ' +
  'before after during between within without under over into through about against each every ' +
  'all any both few many much several same different important available required possible ' +
  'current previous following large small high low long short recent early late public private ' +
  'make take give find provide include consider describe explain return check ensure follow ' +
  'read write send receive create remove keep allow require increase reduce improve measure'
).split(' ');

/** Longer and rarer words: real prose is not all common words, and these split into several tokens. */
const RARE = (
  'configuration synchronization authentication throughput heterogeneous idempotent orchestration ' +
  'quantization observability reconciliation deduplication serialization provisioning latencies ' +
  'preemption tokenizer multiplexing backpressure checkpointing sharding autoscaler telemetry ' +
  'misconfigured non-deterministic well-known end-to-end pre-filled re-evaluated cross-region ' +
  'reimbursement indemnification subrogation amortization depreciation reconciliations ' +
  'pharmacokinetics contraindicated hypertension bronchodilator anticoagulant ' +
  'jurisdictional notwithstanding hereinafter aforementioned counterparty'
).split(' ');

const SUFFIXES = ['s', 'ed', 'ing', 'ly', 'er', 'ment'];

const NAMES = [
  'Alice',
  'Kong',
  'Berlin',
  'Q3',
  'AWS',
  'Postgres',
  'Redis',
  'GPU',
  'SLA',
  'API',
  'Llama',
  'EU',
];
const IDENTS = [
  'request',
  'replica',
  'adapter',
  'count',
  'value',
  'result',
  'items',
  'config',
  'cache',
  'user',
  'index',
  'total',
];
const METHODS = [
  'get',
  'set',
  'push',
  'filter',
  'map',
  'reduce',
  'find',
  'load',
  'parse',
  'send',
  'close',
  'update',
];

const pick = <T>(r: Random, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;

function sentence(r: Random): string {
  const n = 6 + Math.floor(r() * 16);
  const words: string[] = [];
  for (let i = 0; i < n; i++) {
    const x = r();
    if (x < 0.04) words.push(String(Math.floor(r() * 20000)));
    else if (x < 0.07) words.push(`${(r() * 100).toFixed(2)}${pick(r, ['%', ' ms', ' GB', 'x', ' USD'])}`);
    else if (x < 0.11) words.push(pick(r, NAMES));
    else if (x < 0.22) words.push(pick(r, RARE));
    else if (x < 0.25) words.push('`' + ident(r).replace(/[A-Z]/g, (c) => '_' + c.toLowerCase()) + '`');
    else if (x < 0.27) words.push(`(${pick(r, WORDS)})`);
    else if (x < 0.42) words.push(pick(r, WORDS) + pick(r, SUFFIXES));
    else words.push(pick(r, WORDS));
    if (i < n - 1 && r() < 0.08) words[words.length - 1] += ',';
  }
  const s = words.join(' ');
  return s[0]!.toUpperCase() + s.slice(1) + (r() < 0.9 ? '.' : '?');
}

function prose(r: Random): string {
  const out: string[] = [];
  const paragraphs = 1 + Math.floor(r() * 3);
  for (let p = 0; p < paragraphs; p++) {
    const sentences: string[] = [];
    for (let s = 2 + Math.floor(r() * 6); s > 0; s--) sentences.push(sentence(r));
    out.push(sentences.join(' '));
  }
  return out.join('\n\n');
}

function ident(r: Random): string {
  const a = pick(r, IDENTS);
  const b = pick(r, IDENTS);
  return a === b ? a : a + b[0]!.toUpperCase() + b.slice(1);
}

function code(r: Random): string {
  const lines = [
    '```ts',
    `export function ${pick(r, METHODS)}${ident(r).replace(/^./, (c) => c.toUpperCase())}(${ident(r)}: ${pick(r, ['string', 'number', 'Item[]', 'Config'])}) {`,
  ];
  for (let n = 3 + Math.floor(r() * 10); n > 0; n--) {
    const x = r();
    const v = ident(r);
    const pad = ' '.repeat(2 + 2 * Math.floor(r() * 3));
    if (x < 0.3)
      lines.push(
        `${pad}const ${v} = ${ident(r)}.${pick(r, METHODS)}(${ident(r)}[${Math.floor(r() * 8)}], ${Math.floor(r() * 100)});`,
      );
    else if (x < 0.45)
      lines.push(
        `${pad}if (${v}?.length >= ${Math.floor(r() * 64)} && !${ident(r)}) return { ${v}, ok: false };`,
      );
    else if (x < 0.6)
      lines.push(
        `${pad}for (let i = 0; i < ${v}.length; i++) ${ident(r)}[i] += ${v}[i] * ${(r() * 2).toFixed(3)};`,
      );
    else if (x < 0.7) lines.push(`${pad}// ${sentence(r)}`);
    else if (x < 0.85)
      lines.push(`${pad}${v}.${pick(r, METHODS)}((x) => x.${pick(r, IDENTS)} !== ${ident(r)}?.id);`);
    else
      lines.push(
        `${pad}await ${ident(r)}.${pick(r, METHODS)}({ ${v}: ${ident(r)}, timeoutMs: ${Math.floor(r() * 5000)} });`,
      );
  }
  lines.push(`  return ${ident(r)};`, '}', '```');
  return lines.join('\n');
}

function json(r: Random): string {
  const docs = [];
  for (let n = 1 + Math.floor(r() * 4); n > 0; n--) {
    docs.push({
      id: `doc-${Math.floor(r() * 1e9).toString(16)}`,
      chunk: Math.floor(r() * 400),
      title: sentence(r).slice(0, 40),
      score: Math.round(r() * 1e6) / 1e6,
      offsets: [Math.floor(r() * 9000), Math.floor(r() * 9000)],
      tags: [pick(r, WORDS), pick(r, WORDS)],
      updated: `2026-${String(1 + Math.floor(r() * 12)).padStart(2, '0')}-${String(1 + Math.floor(r() * 28)).padStart(2, '0')}`,
      text: sentence(r) + ' ' + sentence(r),
    });
  }
  return JSON.stringify(
    { tool: pick(r, ['search', 'lookup', 'fetch']), results: docs },
    null,
    r() < 0.3 ? 2 : 0,
  );
}

let corpus: string | undefined;

/** The shared corpus, built on first use (about 2 ms per 100k characters). */
export function textCorpus(): string {
  if (corpus === undefined) {
    const r = seededRandom(25);
    const parts: string[] = [];
    let length = 0;
    while (length < CORPUS_CHARS) {
      const x = r();
      const s = x < TEXT_MIX.prose ? prose(r) : x < TEXT_MIX.prose + TEXT_MIX.code ? code(r) : json(r);
      parts.push(s);
      length += s.length + 2;
    }
    corpus = parts.join('\n\n').slice(0, CORPUS_CHARS);
  }
  return corpus;
}

/** `chars` characters of the corpus from `offset` on (wrapping round): the same text for the same arguments. */
export function promptText(offset: number, chars: number): string {
  const c = textCorpus();
  let at = ((Math.floor(offset) % c.length) + c.length) % c.length;
  let out = '';
  while (out.length < chars) {
    const take = Math.min(chars - out.length, c.length - at);
    out += c.slice(at, at + take);
    at = 0;
  }
  return out;
}

/** An offset into the corpus for a 32-bit seed (spread over the whole corpus). */
export function corpusOffset(seed: number): number {
  return Math.floor(seededRandom(seed)() * CORPUS_CHARS);
}
