/**
 * vLLM's other OpenAI-server routes that name a `model` in a JSON body (embeddings, pooling,
 * scores, rerank, tokenize, responses), answered at once with bodies of their documented shape
 * (vllm/entrypoints/openai/protocol.py, v0.10). The engine model is not involved: what the router
 * needs from them is the model check (404 for an adapter the replica does not hold) and a 200.
 */
import { INFERENCE_ROUTES } from '../../src/router/request';
import type { SimError } from './errors';
import { countTokens } from './openai';

/** The router's list of vLLM's JSON routes (one list: both model the same server), less the completions. */
export const MORE_ROUTES = new Set(INFERENCE_ROUTES.filter((r) => !r.endsWith('completions')));

export interface MoreContext {
  /** Whether the model (base or adapter) is served here; an error to answer if not. */
  check: (model: string) => SimError | undefined;
  badRequest: (message: string) => SimError;
  createdUnix: number;
  maxModelLen: number;
  id: () => string;
}

/** A deterministic unit vector from the text, so equal inputs embed equally. */
function embed(text: string, dims = 8): number[] {
  const v = Array.from({ length: dims }, (_, i) => {
    let h = 2166136261 ^ i;
    for (let k = 0; k < text.length; k++) h = Math.imul(h ^ text.charCodeAt(k), 16777619);
    return ((h >>> 0) / 0xffffffff) * 2 - 1;
  });
  const n = Math.hypot(...v) || 1;
  return v.map((x) => x / n);
}
const texts = (x: unknown): string[] =>
  typeof x === 'string'
    ? [x]
    : Array.isArray(x)
      ? x.map((e) => (typeof e === 'string' ? e : JSON.stringify(e)))
      : [];

export function moreAnswer(path: string, body: unknown, c: MoreContext): SimError {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    return c.badRequest(body instanceof Error ? body.message : 'The request body must be a JSON object.');
  const b = body as Record<string, unknown>;
  if (typeof b.model !== 'string') return c.badRequest("Field required: 'model'.");
  const refused = c.check(b.model);
  if (refused) return refused;
  const model = b.model;
  const head = { id: c.id(), object: 'list', created: c.createdUnix, model };
  switch (path) {
    case '/v1/embeddings':
    case '/pooling': {
      const inputs = texts(b.input ?? b.messages);
      const tokens = inputs.reduce((n, t) => n + countTokens(t), 0);
      const object = path === '/pooling' ? 'pooling' : 'embedding';
      const data = inputs.map((t, index) =>
        object === 'embedding' ? { index, object, embedding: embed(t) } : { index, object, data: embed(t) },
      );
      return {
        status: 200,
        body: { ...head, data, usage: { prompt_tokens: tokens, total_tokens: tokens, completion_tokens: 0 } },
      };
    }
    case '/classify': {
      const data = texts(b.input).map((t, index) => {
        const p = (embed(t, 1)[0]! + 1) / 2;
        return { index, label: p >= 0.5 ? 'LABEL_1' : 'LABEL_0', probs: [1 - p, p], num_classes: 2 };
      });
      return {
        status: 200,
        body: { ...head, data, usage: { prompt_tokens: data.length, total_tokens: data.length } },
      };
    }
    case '/score':
    case '/v1/score': {
      const q = texts(b.text_1)[0] ?? '';
      const data = texts(b.text_2).map((t, index) => ({ index, object: 'score', score: score(q, t) }));
      return {
        status: 200,
        body: { ...head, data, usage: { prompt_tokens: data.length, total_tokens: data.length } },
      };
    }
    case '/rerank':
    case '/v1/rerank':
    case '/v2/rerank': {
      const q = typeof b.query === 'string' ? b.query : '';
      const results = texts(b.documents)
        .map((text, index) => ({ index, document: { text }, relevance_score: score(q, text) }))
        .sort((x, y) => y.relevance_score - x.relevance_score);
      return { status: 200, body: { id: head.id, model, usage: { total_tokens: results.length }, results } };
    }
    case '/tokenize': {
      const text = typeof b.prompt === 'string' ? b.prompt : texts(b.messages).join(' ');
      const tokens = Array.from({ length: countTokens(text) }, (_, i) => 1000 + i);
      return { status: 200, body: { count: tokens.length, max_model_len: c.maxModelLen, tokens } };
    }
    case '/detokenize':
      return {
        status: 200,
        body: { prompt: (Array.isArray(b.tokens) ? b.tokens : []).map(() => 'word').join(' ') },
      };
    default: {
      // /v1/responses (non-streaming).
      const text = 'Hello from the simulator.';
      const inputTokens = countTokens(texts(b.input).join(' '));
      return {
        status: 200,
        body: {
          id: `resp_${head.id}`,
          object: 'response',
          created_at: c.createdUnix,
          model,
          status: 'completed',
          output: [
            {
              type: 'message',
              id: `msg_${head.id}`,
              role: 'assistant',
              status: 'completed',
              content: [{ type: 'output_text', text, annotations: [] }],
            },
          ],
          usage: { input_tokens: inputTokens, output_tokens: 5, total_tokens: inputTokens + 5 },
        },
      };
    }
  }
}

function score(a: string, b: string): number {
  const x = embed(a);
  const y = embed(b);
  return (x.reduce((s, v, i) => s + v * y[i]!, 0) + 1) / 2;
}
