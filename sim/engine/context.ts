/**
 * A replica's context length and vLLM's answer to a request longer than it. vLLM will not start
 * with a `max_model_len` its KV cache cannot hold for one request
 * (vllm/v1/core/kv_cache_utils.py `check_enough_kv_cache_memory`, vllm bbf906a88b), so the
 * context a replica answers by is the smaller of its `max_model_len` and its KV capacity.
 */
export function contextLength(maxModelLen: number, kvCapacityTokens: number): number {
  return Math.min(maxModelLen, kvCapacityTokens);
}

/**
 * vLLM's 400 message for prompt + max_tokens past the context, or undefined when it fits
 * (vllm/entrypoints/openai/serving_engine.py `_validate_prompt_and_tokenize`, vllm 0030b9ffce).
 */
export function contextLengthError(
  context: number,
  promptTokens: number,
  maxTokens: number,
): string | undefined {
  if (promptTokens + maxTokens <= context) return undefined;
  return `This model's maximum context length is ${context} tokens. However, you requested ${promptTokens + maxTokens} tokens (${promptTokens} in the messages, ${maxTokens} in the completion). Please reduce the length of the messages or completion.`;
}
