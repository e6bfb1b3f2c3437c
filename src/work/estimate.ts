/**
 * Prompt tokens from the request body the router already parsed, without a tokenizer: a
 * plugin must not ship a model's vocabulary, and the estimate only has to rank replicas and
 * catch prompts far past a context. Characters / 4 is what a BPE tokenizer gives for English
 * text; each chat message adds 4 tokens for its role and template markers (OpenAI's cookbook
 * counts 3-4; the simulator's `countTokens` counts the same, so the benchmark's error is its
 * rounding only). Measured against the simulator in test/core/work-model.test.ts.
 */
export const CHARS_PER_TOKEN = 4;
export const TOKENS_PER_MESSAGE = 4;

export interface TokenEstimate {
  promptTokens: number;
  /** `max_completion_tokens` or `max_tokens`, when the client set one. */
  maxTokens?: number;
}

export function estimateTokens(json: Record<string, unknown> | null): TokenEstimate {
  if (!json) return { promptTokens: 0 };
  let chars = 0;
  let tokens = 0;
  if (Array.isArray(json.messages)) {
    for (const m of json.messages) {
      tokens += TOKENS_PER_MESSAGE;
      const c = (m as { content?: unknown } | null)?.content;
      if (typeof c === 'string') chars += c.length;
      else if (Array.isArray(c))
        for (const part of c) {
          const t = (part as { text?: unknown } | null)?.text;
          if (typeof t === 'string') chars += t.length;
        }
    }
  } else {
    const p = json.prompt;
    if (typeof p === 'string') chars = p.length;
    else if (Array.isArray(p)) {
      // Token ids count as they are; a list of strings (a batch) adds up.
      for (const x of p) {
        if (typeof x === 'number') tokens++;
        else if (typeof x === 'string') chars += x.length;
        else if (Array.isArray(x)) tokens += x.length;
      }
    }
  }
  const promptTokens = tokens + (chars > 0 ? Math.ceil(chars / CHARS_PER_TOKEN) : 0);
  const mt = json.max_completion_tokens ?? json.max_tokens;
  return typeof mt === 'number' && Number.isFinite(mt) && mt > 0
    ? { promptTokens, maxTokens: Math.floor(mt) }
    : { promptTokens };
}
