/** OpenAI-compatible request parsing and response shapes shared by both replica modes. */
import type { ServerResponse } from 'node:http';

export type Endpoint = 'chat' | 'completions';

export interface ParsedCompletion {
  model: string;
  stream: boolean;
  includeUsage: boolean;
  promptTokens: number;
  /** The prompt's text (chat: the messages' contents in order), whose blocks the prefix cache keys. */
  promptText: string;
  maxTokens: number;
  /**
   * The `max_tokens` vLLM checks against the context: the client's, or /v1/completions' default
   * (CompletionRequest's 16, vllm/entrypoints/openai/protocol.py, v0.11.0); undefined for a chat
   * request without one (ChatCompletionRequest's None).
   */
  checkedMaxTokens: number | undefined;
  /** llama.cpp's per-request adapter scales. */
  lora?: unknown;
  /** vLLM's `priority` (lower first; 0 when absent). */
  priority: number;
}

const WORDS = ['the', 'adapter', 'answers', 'with', 'a', 'simulated', 'token', 'stream', 'from', 'replica'];

/** Rough token count of a text: what a BPE tokenizer gives for English, about 4 characters a token. */
export function countTokens(text: string): number {
  return Math.max(1, Math.ceil(text.length / 4));
}

export function tokenText(i: number): string {
  return (i === 0 ? '' : ' ') + WORDS[i % WORDS.length];
}

/** Validates an OpenAI request body; returns a message for a 400 on failure. */
export function parseCompletion(
  endpoint: Endpoint,
  body: unknown,
  defaultMaxTokens: number,
): ParsedCompletion | string {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    return 'Request body must be a JSON object.';
  const b = body as Record<string, unknown>;
  if (typeof b.model !== 'string') return "Field 'model' is required and must be a string.";
  let promptTokens: number;
  let promptText = '';
  if (endpoint === 'chat') {
    if (!Array.isArray(b.messages) || b.messages.length === 0)
      return "Field 'messages' must be a non-empty array.";
    let text = '';
    for (const m of b.messages) {
      if (typeof m !== 'object' || m === null) return 'Each message must be an object.';
      const content = (m as Record<string, unknown>).content;
      if (typeof content === 'string') text += content;
      else if (Array.isArray(content))
        for (const part of content) {
          const t = (part as Record<string, unknown> | null)?.text;
          if (typeof t === 'string') text += t;
        }
    }
    promptTokens = countTokens(text) + 4 * b.messages.length;
    promptText = text;
  } else {
    const p = b.prompt;
    if (typeof p === 'string') promptTokens = countTokens((promptText = p));
    else if (Array.isArray(p) && p.length > 0 && p.every((x) => typeof x === 'number'))
      promptTokens = p.length;
    else if (Array.isArray(p) && p.length > 0 && p.every((x) => typeof x === 'string'))
      promptTokens = countTokens((promptText = p.join('')));
    else return "Field 'prompt' must be a string, a list of strings or a list of token ids.";
  }
  const sent = b.max_completion_tokens ?? b.max_tokens;
  const mt = sent ?? defaultMaxTokens;
  if (typeof mt !== 'number' || !Number.isInteger(mt) || mt < 1)
    return "'max_tokens' must be a positive integer.";
  // (vLLM's own check of the type is not modelled.)
  const priority = Number.isInteger(b.priority) ? (b.priority as number) : 0;
  const so = b.stream_options as Record<string, unknown> | undefined;
  return {
    model: b.model,
    stream: b.stream === true,
    includeUsage: so?.include_usage === true,
    promptTokens,
    promptText,
    maxTokens: mt,
    checkedMaxTokens: sent === undefined && endpoint === 'chat' ? undefined : mt,
    lora: b.lora,
    priority,
  };
}

export function usage(prompt: number, completion: number) {
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

export function completionBody(
  endpoint: Endpoint,
  id: string,
  model: string,
  created: number,
  p: ParsedCompletion,
  outputTokens: number,
) {
  let text = '';
  for (let i = 0; i < outputTokens; i++) text += tokenText(i);
  const finish = outputTokens >= p.maxTokens ? 'length' : 'stop';
  const choice =
    endpoint === 'chat'
      ? { index: 0, message: { role: 'assistant', content: text }, logprobs: null, finish_reason: finish }
      : { index: 0, text, logprobs: null, finish_reason: finish };
  return {
    id,
    object: endpoint === 'chat' ? 'chat.completion' : 'text_completion',
    created,
    model,
    choices: [choice],
    usage: usage(p.promptTokens, outputTokens),
  };
}

export function chunkBody(
  endpoint: Endpoint,
  id: string,
  model: string,
  created: number,
  delta: { role?: string; content?: string },
  finish: string | null,
) {
  const choice =
    endpoint === 'chat'
      ? { index: 0, delta, logprobs: null, finish_reason: finish }
      : { index: 0, text: delta.content ?? '', logprobs: null, finish_reason: finish };
  return {
    id,
    object: endpoint === 'chat' ? 'chat.completion.chunk' : 'text_completion',
    created,
    model,
    choices: [choice],
  };
}

export function sse(data: unknown): string {
  return `data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`;
}

/** SSE: a role chunk first (chat), a chunk per token, a usage chunk if asked, then [DONE]. */
export function streamAnswer(
  endpoint: Endpoint,
  id: string,
  model: string,
  created: number,
  p: ParsedCompletion,
  res: ServerResponse,
) {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
  if (endpoint === 'chat')
    res.write(sse(chunkBody(endpoint, id, model, created, { role: 'assistant', content: '' }, null)));
  return {
    onToken: (i: number) => {
      const last = i + 1 >= p.maxTokens;
      res.write(
        sse(chunkBody(endpoint, id, model, created, { content: tokenText(i) }, last ? 'length' : null)),
      );
    },
    onFinish: (rec: { outputTokens: number }) => {
      if (p.includeUsage) {
        res.write(
          sse({
            id,
            object: 'chat.completion.chunk',
            created,
            model,
            choices: [],
            usage: usage(p.promptTokens, rec.outputTokens),
          }),
        );
      }
      res.end(sse('[DONE]'));
    },
  };
}
