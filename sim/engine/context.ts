/**
 * A replica's context length and vLLM's answer to a request longer than it. vLLM will not start
 * with a `max_model_len` its KV cache cannot hold for one request
 * (vllm/v1/core/kv_cache_utils.py `check_enough_kv_cache_memory`, vLLM v0.11.0), so the
 * context a replica answers by is the smaller of its `max_model_len` and its KV capacity.
 */
export function contextLength(maxModelLen: number, kvCapacityTokens: number): number {
  return Math.min(maxModelLen, kvCapacityTokens);
}

/**
 * vLLM's over-long prompt texts. `released`: `_validate_input`
 * (vllm/entrypoints/openai/serving_engine.py) counts prompt + max_tokens, in the text it had before
 * vLLM PR #22803 (August 2025); v0.11.0 and v0.11.2 answer with two other texts, which no mode
 * plays (docs/replica-apis.md, "vLLM over-long prompt"). `renderer` (v0.19.0, vLLM PR #36197): newer
 * releases check the tokenized prompt against max_model_len - max_tokens in
 * `TokenizeParams._token_len_check` (vllm/renderers/params.py), tokenizing at most one token
 * past that bound (`get_encode_kwargs`), hence "at least"; `param` is `input_tokens`. Both start
 * "This model's maximum context length is N tokens.", which clients match on.
 */
export type ContextErrors = 'released' | 'renderer';

/** vLLM's 400 for prompt + max_tokens past the context, or undefined when it fits. */
export function contextLengthError(
  context: number,
  promptTokens: number,
  maxTokens: number,
  style: ContextErrors = 'released',
): { message: string; param: string | null } | undefined {
  if (promptTokens + maxTokens <= context) return undefined;
  if (style === 'released')
    return {
      message: `This model's maximum context length is ${context} tokens. However, you requested ${promptTokens + maxTokens} tokens (${promptTokens} in the messages, ${maxTokens} in the completion). Please reduce the length of the messages or completion.`,
      param: null,
    };
  const counted = Math.min(promptTokens, Math.max(0, context - maxTokens) + 1);
  return {
    message: `This model's maximum context length is ${context} tokens. However, you requested ${maxTokens} output tokens and your prompt contains at least ${counted} input tokens, for a total of at least ${counted + maxTokens} tokens. Please reduce the length of the input prompt or the number of requested output tokens.`,
    param: 'input_tokens',
  };
}
