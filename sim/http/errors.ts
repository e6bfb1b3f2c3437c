/** Error bodies exactly as each server writes them (see docs/replica-apis.md). */
export type ErrorStyle = 'nested' | 'flat';

export interface SimError {
  status: number;
  body: unknown;
}

/** vLLM's error body: nested since v0.10.1 (unverified; nested at v0.11.0, protocol.py `ErrorResponse`), flat before. */
export function vllmError(
  style: ErrorStyle,
  status: number,
  type: string,
  message: string,
  param: string | null = null,
): SimError {
  const fields = { message, type, param, code: status };
  return { status, body: style === 'nested' ? { error: fields } : { object: 'error', ...fields } };
}

/** llama.cpp server's error body. */
export function llamacppError(status: number, type: string, message: string): SimError {
  return { status, body: { error: { code: status, message, type } } };
}

/** FastAPI's answer for a route that does not exist (vLLM without runtime LoRA updating). */
export const fastapiNotFound: SimError = { status: 404, body: { detail: 'Not Found' } };
export const fastapiMethodNotAllowed: SimError = { status: 405, body: { detail: 'Method Not Allowed' } };
