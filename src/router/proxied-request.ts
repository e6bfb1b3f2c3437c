import { errors } from '../errors';
import { nestedDeeperThan, withLastMember } from './body-member';

/** Host and port of a replica URL, as `kong.service.set_target` takes them (IPv6 unbracketed), and its scheme. */
export function targetOf(url: string): { host: string; port: number; https: boolean } {
  const u = new URL(url);
  const https = u.protocol === 'https:';
  return { host: u.hostname.replace(/^\[|\]$/g, ''), port: Number(u.port || (https ? 443 : 80)), https };
}

/**
 * The deepest nesting sent to a llama.cpp replica. nlohmann::json parses any depth, but copying
 * or writing a parsed value recurses once per level (`basic_json(const basic_json&)`,
 * `serializer::dump`, v3.11.3), on an HTTP thread's stack. No OpenAI request comes near it (a
 * tool schema nests a few dozen levels); the bound used to be V8's own, where JSON.stringify
 * gave up (4,456 levels in Node 24, fewer inside the plugin server). src/errors.ts says it too.
 */
export const LLAMA_MAX_DEPTH = 1000;

/**
 * A llama.cpp request's body: every adapter the replica lists, with an explicit scale (1 for
 * the requested one, 0 for the others; all 0 for the base model). Builds differ on what an empty
 * or partial list means (older, to b7502: unlisted at 0; current, since PR #18263 (b7516) and read at
 * b10573: an empty list is no field, so the global scales apply, llama.cpp issue 28674; newest:
 * unlisted keep their global scale, not found upstream), and a full
 * list means the same on all of them. The client's text (which parsed as `json`) with `lora` added
 * as the last member (src/router/body-member.ts): a `lora` of the client's own stays where it
 * was and is overridden, as llama.cpp's parser keeps the last of a repeated key. The list is read
 * as `[{id, scale}]` (tools/server/server-common.cpp `parse_lora_request`, llama.cpp b7193 and b10573).
 */
export function llamaBody(
  json: Record<string, unknown>,
  text: string,
  llamaId: number | undefined,
  ids: number[],
): string {
  if (nestedDeeperThan(text, LLAMA_MAX_DEPTH)) {
    throw errors.badRequest('The request body is nested too deeply.', 'invalid_json');
  }
  const all = llamaId === undefined || ids.includes(llamaId) ? ids : [...ids, llamaId];
  const lora = JSON.stringify(all.map((id) => ({ id, scale: id === llamaId ? 1.0 : 0.0 })));
  return withLastMember(json, text, 'lora', lora);
}
