/** Small HTTP helpers for tests: real requests over loopback, every wait bounded. */
export interface Reply {
  status: number;
  headers: Headers;
  text: string;
  json: <T = any>() => T;
}

export async function call(
  base: string,
  path: string,
  init: {
    method?: string;
    body?: unknown;
    raw?: string;
    timeoutMs?: number;
    headers?: Record<string, string>;
  } = {},
): Promise<Reply> {
  const body = init.raw ?? (init.body === undefined ? undefined : JSON.stringify(init.body));
  const res = await fetch(base + path, {
    method: init.method ?? (body === undefined ? 'GET' : 'POST'),
    body,
    headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...init.headers },
    signal: AbortSignal.timeout(init.timeoutMs ?? 10000),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: () => JSON.parse(text) };
}

export const get = (base: string, path: string, timeoutMs?: number) => call(base, path, { timeoutMs });
export const post = (base: string, path: string, body: unknown, timeoutMs?: number) =>
  call(base, path, { body, timeoutMs });

export function chat(model: string, maxTokens = 4, extra: Record<string, unknown> = {}) {
  return { model, messages: [{ role: 'user', content: 'Say hello.' }], max_tokens: maxTokens, ...extra };
}

/** Parses an SSE body into its `data:` payloads. */
export function sseEvents(text: string): string[] {
  return text
    .split('\n\n')
    .filter((b) => b.length > 0)
    .map((b) => {
      if (!b.startsWith('data: ')) throw new Error(`not an SSE data event: ${JSON.stringify(b)}`);
      return b.slice('data: '.length);
    });
}
