import { countTokens as gpt4Tokens } from 'gpt-tokenizer/cjs/model/gpt-4';
import { countTokens as gpt4oTokens } from 'gpt-tokenizer/cjs/model/gpt-4o';
import { parseCompletion } from '../sim/http/openai';
import { chatBody } from '../sim/workload/body';
import { burstyWorkload } from '../sim/workload/bursty';
import { longWorkload } from '../sim/workload/long';
import { percentile } from '../sim/workload/percentile';
import { TEXT_MIX, textCorpus } from '../sim/workload/text';
import type { Arrival } from '../sim/workload/workload';
import { estimateTokens } from '../src/work/estimate';

/** A chat body as the router and the replica read it. */
export interface ChatPrompt {
  body: Record<string, unknown>;
  messages: { role: 'system' | 'user'; content: string }[];
}

/** How far the router's estimate is from one reference count, over a sample of prompts. */
export interface EstimateError {
  reference: string;
  prompts: number;
  /** Mean of (estimate - reference) / reference: > 0 overcounts. */
  bias: number;
  /** Of |estimate - reference| / reference. */
  meanAbs: number;
  p50Abs: number;
  p95Abs: number;
  maxAbs: number;
  /** Characters of message text per reference token (the estimate assumes 4). */
  charsPerToken: number;
}

/**
 * The counts the estimate is measured against: the simulator's (what the benchmark's replicas
 * answer in `usage`), and two real BPE tokenizers with their chat framing (gpt-tokenizer 4:
 * o200k_base as GPT-4o counts a chat, cl100k_base as GPT-4 does). A Llama 3 tokenizer is not
 * installed; its vocabulary (128k, tiktoken-style) sits between the two.
 */
export const REFERENCES: { name: string; count: (p: ChatPrompt) => number }[] = [
  {
    name: 'simulator (sim/http/openai.ts)',
    count: (p) => {
      const r = parseCompletion('chat', p.body, 16);
      if (typeof r === 'string') throw new Error(r);
      return r.promptTokens;
    },
  },
  { name: 'o200k_base (GPT-4o chat)', count: (p) => gpt4oTokens(p.messages) },
  { name: 'cl100k_base (GPT-4 chat)', count: (p) => gpt4Tokens(p.messages) },
];

/** The generated chat prompts of `n` requests of a workload (their bodies as the DES sends them). */
export function workloadPrompts(workload: 'long' | 'bursty', n: number, seed: number): ChatPrompt[] {
  const arrivals: Arrival[] = workload === 'long' ? longWorkload(n, seed) : burstyWorkload(n, seed);
  return arrivals.map((a) => {
    const body = JSON.parse(chatBody('adapter', a, false).toString()) as ChatPrompt['body'];
    return { body, messages: body.messages as ChatPrompt['messages'] };
  });
}

/** The router's estimate (src/work/estimate.ts) against `reference` over `prompts`. */
export function estimateError(
  prompts: ChatPrompt[],
  reference: { name: string; count: (p: ChatPrompt) => number },
): EstimateError {
  const rel: number[] = [];
  let chars = 0;
  let tokens = 0;
  for (const p of prompts) {
    const est = estimateTokens(p.body).promptTokens;
    const ref = reference.count(p);
    rel.push((est - ref) / ref);
    chars += p.messages.reduce((n, m) => n + m.content.length, 0);
    tokens += ref;
  }
  const abs = rel.map(Math.abs);
  return {
    reference: reference.name,
    prompts: prompts.length,
    bias: rel.reduce((a, b) => a + b, 0) / rel.length,
    meanAbs: abs.reduce((a, b) => a + b, 0) / abs.length,
    p50Abs: percentile(abs, 0.5),
    p95Abs: percentile(abs, 0.95),
    maxAbs: Math.max(...abs),
    charsPerToken: chars / tokens,
  };
}

/** Characters per o200k_base token of each kind of text in the generated corpus (prose, code, JSON). */
export function charsPerTokenByKind(): Record<keyof typeof TEXT_MIX, number> {
  const kinds = { prose: '', code: '', json: '' };
  for (const part of textCorpus().split('\n\n')) {
    const kind = part.startsWith('```') ? 'code' : part.startsWith('{') ? 'json' : 'prose';
    kinds[kind] += part + '\n\n';
  }
  const out = { prose: 0, code: 0, json: 0 };
  for (const k of Object.keys(kinds) as (keyof typeof kinds)[])
    out[k] = kinds[k].length / gpt4oTokens(kinds[k]);
  return out;
}
