/** OpenAI-compatible request parsing and response shapes shared by both replica modes. */
import type { ServerResponse } from 'node:http';

export type Endpoint = 'chat' | 'completions';

/** One prompt: chat's messages, or one of /v1/completions' prompts. */
export interface Prompt {
  tokens: number;
  /** Its text (chat: the messages' contents in order), whose blocks the prefix cache keys. */
  text: string;
}

export interface ParsedCompletion {
  model: string;
  stream: boolean;
  includeUsage: boolean;
  /**
   * The prompts: one, or a /v1/completions batch (a list of strings or of token-id lists), which
   * vLLM serves as one engine request per prompt, each checked against the context and given its
   * own `get_max_tokens` (`create_completion`, serving_completion.py at v0.11.0 and v0.11.2,
   * completion/serving.py at v0.19.0).
   */
  prompts: Prompt[];
  /** All prompts' tokens: the usage's `prompt_tokens`. */
  promptTokens: number;
  /** The body's `request_id`, which names the completion when no X-Request-Id header does. */
  requestId?: string;
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
  let prompts: Prompt[];
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
    prompts = [{ tokens: countTokens(text) + 4 * b.messages.length, text }];
  } else {
    const p = b.prompt;
    const isIds = (x: unknown): x is number[] =>
      Array.isArray(x) && x.length > 0 && x.every((t) => typeof t === 'number');
    if (typeof p === 'string') prompts = [{ tokens: countTokens(p), text: p }];
    else if (isIds(p)) prompts = [{ tokens: p.length, text: '' }];
    else if (Array.isArray(p) && p.length > 0 && p.every((x) => typeof x === 'string'))
      prompts = (p as string[]).map((x) => ({ tokens: countTokens(x), text: x }));
    else if (Array.isArray(p) && p.length > 0 && p.every(isIds))
      prompts = p.map((x) => ({ tokens: x.length, text: '' }));
    else
      return "Field 'prompt' must be a string, a list of strings, a list of token ids or a list of token-id lists.";
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
    prompts,
    promptTokens: prompts.reduce((n, x) => n + x.tokens, 0),
    ...(typeof b.request_id === 'string' && b.request_id !== '' ? { requestId: b.request_id } : {}),
    maxTokens: mt,
    checkedMaxTokens: sent === undefined && endpoint === 'chat' ? undefined : mt,
    lora: b.lora,
    priority,
  };
}

export function usage(prompt: number, completion: number) {
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

/** What one choice produced: its tokens, and the `max_tokens` it was given (for its finish reason). */
export interface ChoiceResult {
  outputTokens: number;
  maxTokens: number;
}

function answerText(outputTokens: number): string {
  let text = '';
  for (let i = 0; i < outputTokens; i++) text += tokenText(i);
  return text;
}

/** A whole answer: one choice per prompt (index = the prompt's), usage summed over them. */
export function completionBody(
  endpoint: Endpoint,
  id: string,
  model: string,
  created: number,
  promptTokens: number,
  results: readonly ChoiceResult[],
) {
  const choices = results.map((r, index) => {
    const finish = r.outputTokens >= r.maxTokens ? 'length' : 'stop';
    const text = answerText(r.outputTokens);
    return endpoint === 'chat'
      ? { index, message: { role: 'assistant', content: text }, logprobs: null, finish_reason: finish }
      : { index, text, logprobs: null, finish_reason: finish };
  });
  const completionTokens = results.reduce((n, r) => n + r.outputTokens, 0);
  return {
    id,
    object: endpoint === 'chat' ? 'chat.completion' : 'text_completion',
    created,
    model,
    choices,
    usage: usage(promptTokens, completionTokens),
  };
}

/** The object of every streamed chunk, the usage chunk included (ChatCompletionStreamResponse, CompletionStreamResponse). */
function chunkObject(endpoint: Endpoint): string {
  return endpoint === 'chat' ? 'chat.completion.chunk' : 'text_completion';
}

export function chunkBody(
  endpoint: Endpoint,
  id: string,
  model: string,
  created: number,
  delta: { role?: string; content?: string },
  finish: string | null,
  index = 0,
) {
  const choice =
    endpoint === 'chat'
      ? { index, delta, logprobs: null, finish_reason: finish }
      : { index, text: delta.content ?? '', logprobs: null, finish_reason: finish };
  return { id, object: chunkObject(endpoint), created, model, choices: [choice] };
}

export function sse(data: unknown): string {
  return `data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`;
}

/**
 * SSE: a role chunk first (chat), a chunk per token of each choice (by its index), a usage chunk
 * summed over the choices if asked, then [DONE].
 */
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
    onToken: (choice: number, i: number, maxTokens: number) => {
      const last = i + 1 >= maxTokens;
      res.write(
        sse(
          chunkBody(endpoint, id, model, created, { content: tokenText(i) }, last ? 'length' : null, choice),
        ),
      );
    },
    onFinish: (completionTokens: number) => {
      if (p.includeUsage) {
        res.write(
          sse({
            id,
            object: chunkObject(endpoint),
            created,
            model,
            choices: [],
            usage: usage(p.promptTokens, completionTokens),
          }),
        );
      }
      res.end(sse('[DONE]'));
    },
  };
}
