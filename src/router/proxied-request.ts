import { errors } from '../errors';

/** Host and port of a replica URL, as `kong.service.set_target` takes them (IPv6 unbracketed), and its scheme. */
export function targetOf(url: string): { host: string; port: number; https: boolean } {
  const u = new URL(url);
  const https = u.protocol === 'https:';
  return { host: u.hostname.replace(/^\[|\]$/g, ''), port: Number(u.port || (https ? 443 : 80)), https };
}

/**
 * A llama.cpp request's body: every adapter the replica lists, with an explicit scale (1 for
 * the requested one, 0 for the others; all 0 for the base model). Builds differ on what an empty
 * or partial list means (older: unlisted at 0; current: an empty list is no field, so the global
 * scales apply, llama.cpp issue 28674; newest: unlisted keep their global scale), and a full
 * list means the same on all of them. The client's own `lora` is replaced.
 */
export function llamaBody(json: Record<string, unknown>, llamaId: number | undefined, ids: number[]): string {
  try {
    const all = llamaId === undefined || ids.includes(llamaId) ? ids : [...ids, llamaId];
    return JSON.stringify({ ...json, lora: all.map((id) => ({ id, scale: id === llamaId ? 1.0 : 0.0 })) });
  } catch {
    // V8 parses nesting it cannot serialise again.
    throw errors.badRequest('The request body is nested too deeply.', 'invalid_json');
  }
}
