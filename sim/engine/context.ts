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
 * vLLM's over-long prompt texts. `released` (v0.11.0 and v0.11.2, read at both tags):
 * `_validate_input` (vllm/entrypoints/openai/serving_engine.py) refuses a prompt of the context or
 * more ("However, your request has P input tokens."), then a `max_tokens` past what the prompt
 * leaves ("'max_tokens' or 'max_completion_tokens' is too large: M."; the text from vLLM PR
 * #22803; before it, one text counted prompt + max_tokens). `renderer` (v0.19.0, vLLM PR #36197):
 * `TokenizeParams._token_len_check` (vllm/renderers/params.py) checks the tokenized prompt against
 * max_model_len - max_tokens, tokenizing at most one token past that bound (`get_encode_kwargs`),
 * hence "at least"; `param` is `input_tokens`. All but the max_tokens text start "This model's
 * maximum context length is N tokens.", which clients match on.
 *
 * In `released`, /v1/completions takes neither `_validate_input` text: its prompts go through the
 * renderer (vllm/entrypoints/renderer.py `_create_tokens_prompt`, v0.11.0 and v0.11.2), which refuses
 * each prompt longer than max_model_len - max_tokens (`_build_render_config`,
 * serving_completion.py) and names that difference as the context length.
 */
export type ContextErrors = 'released' | 'renderer';

/**
 * vLLM's 400 for a request past the context, or undefined when it fits. `maxTokens` is the one
 * vLLM checks: the client's, or /v1/completions' default (16); undefined for a chat request
 * without one, which both releases check by its prompt alone.
 */
export function contextLengthError(
  context: number,
  promptTokens: number,
  maxTokens: number | undefined,
  style: ContextErrors = 'released',
  endpoint: 'chat' | 'completions' = 'chat',
): { message: string; param: string | null } | undefined {
  if (style === 'released' && endpoint === 'completions' && maxTokens !== undefined) {
    const maxLength = context - maxTokens;
    if (promptTokens <= maxLength) return undefined;
    return {
      message: `This model's maximum context length is ${maxLength} tokens. However, your request has ${promptTokens} input tokens. Please reduce the length of the input messages.`,
      param: null,
    };
  }
  if (style === 'released') {
    // A completion needs one token of context: a prompt of the whole context is refused.
    if (promptTokens >= context)
      return {
        message: `This model's maximum context length is ${context} tokens. However, your request has ${promptTokens} input tokens. Please reduce the length of the input messages.`,
        param: null,
      };
    if (maxTokens === undefined || promptTokens + maxTokens <= context) return undefined;
    return {
      message: `'max_tokens' or 'max_completion_tokens' is too large: ${maxTokens}. This model's maximum context length is ${context} tokens and your request has ${promptTokens} input tokens (${maxTokens} > ${context} - ${promptTokens}).`,
      param: null,
    };
  }
  // No max_tokens: 0 output tokens (`build_tok_params`, `max_output_tokens or 0`).
  const output = maxTokens ?? 0;
  if (promptTokens + output <= context) return undefined;
  const counted = Math.min(promptTokens, Math.max(0, context - output) + 1);
  return {
    message: `This model's maximum context length is ${context} tokens. However, you requested ${output} output tokens and your prompt contains at least ${counted} input tokens, for a total of at least ${counted + output} tokens. Please reduce the length of the input prompt or the number of requested output tokens.`,
    param: 'input_tokens',
  };
}
