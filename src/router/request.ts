import { errors } from '../errors';

export type PathClass = 'admin' | 'models' | 'model' | 'inference' | 'other';

/** Replica routes no client may reach through the gateway: adapter management and the simulator's control API. */
const ADMIN_SEGMENTS = [
  '/v1/load_lora_adapter',
  '/v1/unload_lora_adapter',
  '/lora-adapters',
  '/_sim/',
  '/slots',
];

/**
 * Classifies a request path. Matching is on the decoded, normalised path and anywhere in it,
 * so a route prefix (`/llm/v1/load_lora_adapter`), a double slash or `%2F` does not slip by.
 */
export function classifyPath(rawPath: string): PathClass {
  let cls = classified.get(rawPath);
  if (cls === undefined) {
    cls = classifyOnce(rawPath);
    // A gateway sees few paths; a client inventing paths only empties this now and then.
    if (classified.size >= CLASSIFIED_PATHS) classified.clear();
    classified.set(rawPath, cls);
  }
  return cls;
}

/** Raw paths classified so far (the same few on every request). */
const classified = new Map<string, PathClass>();
const CLASSIFIED_PATHS = 1024;

function classifyOnce(rawPath: string): PathClass {
  const path = normalisePath(rawPath).toLowerCase();
  const withSlash = path.endsWith('/') ? path : path + '/';
  for (const seg of ADMIN_SEGMENTS) {
    if (withSlash.includes(seg.endsWith('/') ? seg : seg + '/')) return 'admin';
  }
  if (/\/v1\/models\/?$/.test(path)) return 'models';
  if (MODEL_PATH.test(path)) return 'model';
  if (INFERENCE_PATH.test(path)) return 'inference';
  return 'other';
}

/** `GET /v1/models/{id}`: the id may hold slashes (`org/model`), as clients send it encoded or not. */
const MODEL_PATH = /\/v1\/models\/(.+?)\/?$/;

/** The path decoded, with repeated slashes and `/.` segments gone (case kept). */
function normalisePath(rawPath: string): string {
  let path: string;
  try {
    path = decodeURIComponent(rawPath);
  } catch {
    path = rawPath;
  }
  return path.replace(/\/{2,}/g, '/').replace(/\/\.(?=\/|$)/g, '');
}

/** The model id of a `model` path (`/v1/models/{id}`), as the client wrote it. */
export function modelIdOf(rawPath: string): string {
  return MODEL_PATH.exec(normalisePath(rawPath))?.[1] ?? '';
}

/**
 * The routes vLLM's OpenAI server answers with a JSON body naming the `model` (FastAPI routes in
 * vllm/entrypoints/openai/api_server.py, v0.10): each is routed like chat. The audio routes take
 * multipart forms, whose model the router does not read: they go to the base model's replicas.
 */
export const INFERENCE_ROUTES = [
  '/v1/chat/completions',
  '/v1/completions',
  '/v1/embeddings',
  '/v1/responses',
  '/v1/score',
  '/v1/rerank',
  '/v2/rerank',
  '/pooling',
  '/classify',
  '/score',
  '/rerank',
  '/tokenize',
  '/detokenize',
];
const INFERENCE_PATH = new RegExp(
  `(?:${INFERENCE_ROUTES.map((r) => r.replace(/\//g, '\\/')).join('|')})\\/?$`,
);

/** The methods each class of path answers; anything else gets 405 (FastAPI's answer upstream). */
export function allowedMethods(cls: PathClass): string[] | undefined {
  if (cls === 'inference') return ['POST'];
  if (cls === 'models' || cls === 'model') return ['GET', 'HEAD'];
  return undefined;
}

/** The parsed JSON object (null for an empty body), its text as JSON.parse read it (what a rewrite splices into). */
export type ParsedBody =
  | { json: null; text?: undefined; model?: undefined }
  | { json: Record<string, unknown>; text: string; model?: string };

/**
 * Reads the request body Kong handed over. `undefined`/`null` for a request that has a body
 * means Kong could not hand it over (spooled to a file past nginx's body buffer): 413.
 */
export function parseBody(
  body: Uint8Array | string | null | undefined,
  cls: PathClass,
  maxBytes: number,
): ParsedBody {
  if (body === undefined || body === null) {
    if (cls === 'inference') {
      throw errors.bodyUnreadable();
    }
    return { json: null };
  }
  const size = typeof body === 'string' ? Buffer.byteLength(body) : body.length;
  if (size > maxBytes) throw errors.tooLarge(maxBytes);
  if (size === 0) {
    if (cls === 'inference') throw errors.badRequest('The request body is empty; expected a JSON object.');
    return { json: null };
  }
  // msgpack `bin` arrives as a plain Uint8Array, whose toString() is not the text.
  const text =
    typeof body === 'string'
      ? body
      : Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    const reason = err instanceof RangeError ? 'it is nested too deeply' : 'it is not valid JSON';
    throw errors.badRequest(`The request body could not be parsed: ${reason}.`, 'invalid_json');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw errors.badRequest('The request body must be a JSON object.', 'invalid_json');
  }
  const json = value as Record<string, unknown>;
  const model = json.model;
  if (model !== undefined && typeof model !== 'string') {
    throw errors.badRequest("'model' must be a string.", 'invalid_model');
  }
  if (cls === 'inference' && (model === undefined || model === '')) {
    throw errors.badRequest("'model' is required.", 'invalid_model');
  }
  return { json, text, model };
}

/** The leading prompt text, for prefix affinity: chat messages' text or the completion prompt. */
export function promptText(json: Record<string, unknown> | null, maxChars: number): string | undefined {
  if (!json) return undefined;
  let out = '';
  const add = (s: unknown) => {
    if (typeof s === 'string' && out.length < maxChars) out += s.slice(0, maxChars - out.length);
  };
  if (Array.isArray(json.messages)) {
    for (const m of json.messages) {
      if (out.length >= maxChars) break;
      const c = (m as { content?: unknown } | null)?.content;
      if (Array.isArray(c)) for (const part of c) add((part as { text?: unknown } | null)?.text);
      else add(c);
    }
  } else if (typeof json.prompt === 'string') add(json.prompt);
  return out || undefined;
}
