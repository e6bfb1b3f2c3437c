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
  const prefixTokens = a.prefix
    ? Math.min(a.prefix.tokens, Math.max(0, a.promptTokens - 2 * PER_MESSAGE - 1))
    : 0;
  if (a.prefix && prefixTokens > 0)
    messages.push({ role: 'system', content: systemPrompt(a.prefix.id, prefixTokens) });
  const userTokens = Math.max(1, a.promptTokens - prefixTokens - PER_MESSAGE * (messages.length + 1));
  const tag = `[${a.at.toFixed(3)} ${a.promptTokens}] `;
  const chars = userTokens * CHARS_PER_TOKEN;
  const seed = Math.floor(a.at * 1000) ^ Math.imul(a.promptTokens, 40503);
  const user = (tag + promptText(corpusOffset(seed), Math.max(0, chars - tag.length))).slice(0, chars);
  messages.push({ role: 'user', content: user });
  return Buffer.from(JSON.stringify({ model, messages, max_tokens: a.outputTokens, stream }));
}
