import { segmentBlocks, type PromptSegment } from '../engine/prefix-blocks';
import { corpusOffset, promptText } from './text';
import type { Arrival } from './workload';

/** Characters per token of the simulator's tokenizer (sim/http/openai.ts countTokens). */
const CHARS_PER_TOKEN = 4;
/** Tokens the simulator counts per chat message on top of its text (sim/http/openai.ts parseCompletion). */
const PER_MESSAGE = 4;

/**
 * The text of shared system prompt `id`, `tokens` long by the simulator's count: the same text
 * for every request that shares it (a shorter one is a prefix of a longer one).
 */
export function systemPrompt(id: number, tokens: number): string {
  return promptText(corpusOffset(id * 2654435761), tokens * CHARS_PER_TOKEN);
}

/**
 * A chat completion body the simulator counts as exactly `promptTokens` prompt tokens (and the
 * router estimates from, as in production): the shared system prompt when the request has one,
 * then a user message opening with a tag of its own so that requests diverge after the shared
 * part. The text is English, code and JSON (sim/workload/text.ts), so a real tokenizer counts it
 * as it counts agent and RAG traffic (bench part `tokens` measures the estimate against one).
 * Built on demand and dropped after use, so a workload of long prompts costs memory only for
 * the requests in flight.
 */
export function chatBody(model: string, a: Arrival, stream = true): Buffer {
  const messages: { role: string; content: string }[] = [];
  const prefixTokens = systemTokens(a);
  if (a.prefix && prefixTokens > 0)
    messages.push({ role: 'system', content: systemPrompt(a.prefix.id, prefixTokens) });
  const h = a.history;
  // A conversation's earlier turns, then its new question: the same text each time it is sent.
  h?.turns.forEach((t, j) =>
    messages.push({ role: j % 2 === 0 ? 'user' : 'assistant', content: turnText(h.conversation, j, t) }),
  );
  const userTokens = Math.max(
    1,
    a.promptTokens - prefixTokens - historyTokens(a) - PER_MESSAGE * (messages.length + 1),
  );
  let user: string;
  if (h) user = turnText(h.conversation, h.turns.length, userTokens);
  else {
    const tag = `[${a.at.toFixed(3)} ${a.promptTokens}] `;
    const chars = userTokens * CHARS_PER_TOKEN;
    const seed = Math.floor(a.at * 1000) ^ Math.imul(a.promptTokens, 40503);
    user = (tag + promptText(corpusOffset(seed), Math.max(0, chars - tag.length))).slice(0, chars);
  }
  messages.push({ role: 'user', content: user });
  return Buffer.from(JSON.stringify({ model, messages, max_tokens: a.outputTokens, stream }));
}

/** The system prompt's tokens in `a`'s body (what is left of a short prompt goes to the question). */
function systemTokens(a: Arrival): number {
  return a.prefix ? Math.min(a.prefix.tokens, Math.max(0, a.promptTokens - 2 * PER_MESSAGE - 1)) : 0;
}

function historyTokens(a: Arrival): number {
  return a.history?.turns.reduce((n, t) => n + t, 0) ?? 0;
}

/** Message `j` of conversation `c`, `tokens` long: a question opens with the conversation's tag. */
function turnText(c: number, j: number, tokens: number): string {
  const tag = `[conversation ${c}, message ${j}] `;
  const chars = tokens * CHARS_PER_TOKEN;
  return (
    tag + promptText(corpusOffset(Math.imul(c, 2246822519) ^ j), Math.max(0, chars - tag.length))
  ).slice(0, chars);
}

/**
 * The KV blocks of `a`'s prompt and answer for the engine's prefix cache (`EngineRequest.blocks`),
 * laid out as `chatBody` writes the prompt: its system prompt, a conversation's earlier messages
 * and its new question (each with its message's template tokens), then the answer; anything else
 * is the request's own (`own`). Keyed by the adapter too: a LoRA request's KV is its own.
 */
export function arrivalBlocks(a: Arrival, adapter: string | null, own: string): string[] {
  const segments: PromptSegment[] = [];
  const app = adapter ?? '';
  const sys = systemTokens(a);
  if (a.prefix && sys > 0) segments.push({ key: `${app}|s${a.prefix.id}`, tokens: sys + PER_MESSAGE });
  const h = a.history;
  if (h) {
    const c = `${app}|c${h.conversation}`;
    h.turns.forEach((t, j) => segments.push({ key: `${c}.${j}`, tokens: t + PER_MESSAGE }));
    const rest = a.promptTokens - segments.reduce((n, s) => n + s.tokens, 0);
    segments.push({ key: `${c}.${h.turns.length}`, tokens: rest });
    segments.push({ key: `${c}.${h.turns.length + 1}`, tokens: a.outputTokens });
  }
  return segmentBlocks(segments, a.promptTokens + a.outputTokens, own);
}
