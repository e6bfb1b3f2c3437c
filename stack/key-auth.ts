import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import type { ExitResponse, KongRequest } from '../harness/kong/driver';

/**
 * Kong's key-auth, as far as a browser or a client meets it, for the local gateway (opt-in:
 * `npm start` does not run bundled plugins). Read from Kong/kong 3.9.3
 * kong/plugins/key-auth/schema.lua (`key_names` default `["apikey"]`, `key_in_header` and
 * `key_in_query` default true, `key_in_body` false) and handler.lua `do_authentication`: for
 * each key name in order, the header, then the query argument; a repeated one is "Duplicate
 * API key found"; none is 401 "No API key found in request"; a key no consumer holds is 401
 * "Unauthorized"; every 401 carries `WWW-Authenticate: Key`. Not emulated: `key_in_body`,
 * `hide_credentials`, `anonymous`, `realm`.
 */
export interface KeyAuthConfig {
  key_names?: string[];
  key_in_header?: boolean;
  key_in_query?: boolean;
}

interface Deck {
  services?: { name: string; plugins?: { name: string; config?: KeyAuthConfig }[] }[];
  consumers?: { username?: string; id?: string; keyauth_credentials?: { key: string }[] }[];
}

/** key-auth on `service` in a decK file, as a gateway `before` hook; undefined if it has none. */
export function keyAuthOf(
  kongYaml: string,
  service: string,
): ((req: KongRequest) => ExitResponse | undefined) | undefined {
  const deck = parse(readFileSync(kongYaml, 'utf8')) as Deck;
  const plugin = deck.services?.find((s) => s.name === service)?.plugins?.find((p) => p.name === 'key-auth');
  if (!plugin) return undefined;
  const conf = plugin.config ?? {};
  const names = conf.key_names ?? ['apikey'];
  const consumers = new Map<string, { id: string; username?: string }>();
  for (const c of deck.consumers ?? [])
    for (const k of c.keyauth_credentials ?? [])
      consumers.set(k.key, { id: c.id ?? c.username ?? k.key, username: c.username });
  const unauthorized = (message: string): ExitResponse => ({
    status: 401,
    body: Buffer.from(JSON.stringify({ message })),
    headers: { 'Content-Type': 'application/json; charset=utf-8', 'WWW-Authenticate': 'Key' },
  });
  return (req) => {
    const query = new URLSearchParams(
      req.path.includes('?') ? req.path.slice(req.path.indexOf('?') + 1) : '',
    );
    let key: string | undefined;
    for (const name of names) {
      let v: string | string[] | undefined;
      if (conf.key_in_header !== false) v = req.headers[name.toLowerCase()];
      if (v === undefined && conf.key_in_query !== false) {
        const all = query.getAll(name);
        v = all.length > 1 ? all : all[0];
      }
      if (Array.isArray(v)) return unauthorized('Duplicate API key found');
      if (v !== undefined) {
        key = v;
        break;
      }
    }
    if (!key) return unauthorized('No API key found in request');
    const consumer = consumers.get(key);
    if (!consumer) return unauthorized('Unauthorized');
    req.consumer = consumer;
    return undefined;
  };
}
