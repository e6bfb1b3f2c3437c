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
  /** All prompts: a batch of completion prompts is all prefilled on the replica. */
  promptTokens: number;
  /**
   * The longest single prompt: vLLM checks each prompt of a batch against the context on its
   * own (`create_completion`: one engine request, one renderer check and one `get_max_tokens` per
   * prompt; vllm/entrypoints/openai/serving_completion.py at v0.11.0 and v0.11.2,
   * completion/serving.py at v0.19.0).
   */
  longestPromptTokens: number;
  /** `max_completion_tokens` or `max_tokens`, when the client set one. */
  maxTokens?: number;
}

export function estimateTokens(json: Record<string, unknown> | null): TokenEstimate {
  if (!json) return { promptTokens: 0, longestPromptTokens: 0 };
  let chars = 0;
  let tokens = 0;
  let longest = -1;
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
      // Token ids count as they are; a list of strings or of id lists (a batch) adds up.
      for (const x of p) {
        let n = -1;
        if (typeof x === 'number') tokens++;
        else if (typeof x === 'string') {
          chars += x.length;
          n = Math.ceil(x.length / CHARS_PER_TOKEN);
        } else if (Array.isArray(x)) tokens += n = x.length;
        if (n > longest) longest = n;
      }
    }
  }
  const promptTokens = tokens + (chars > 0 ? Math.ceil(chars / CHARS_PER_TOKEN) : 0);
  // One prompt (chat, a string, a flat id list): the longest is the whole.
  const longestPromptTokens = longest < 0 ? promptTokens : longest;
  const mt = json.max_completion_tokens ?? json.max_tokens;
  return typeof mt === 'number' && Number.isFinite(mt) && mt > 0
    ? { promptTokens, longestPromptTokens, maxTokens: Math.floor(mt) }
    : { promptTokens, longestPromptTokens };
}
