import {
  ConfigError,
  validateRecord,
  type FieldDef,
  type FieldError,
  type SchemaFields,
} from './kong-schema';
import { normalizeRedis, type RedisConfig } from './redis-schema';
import { pollerSchema, type PollerConfig } from './poller-schema';
import { routerSchema, type RouterConfig } from './router-schema';

/**
 * Keys Kong adds to a plugin's config when it starts an instance (not part of the schema):
 * Kong/kong 3.9.3 kong/runloop/plugins_iterator.lua `get_plugin_config` (and every `__` key).
 */
const KONG_KEYS = new Set([
  'route_id',
  'service_id',
  'consumer_id',
  'consumer_group_id',
  'plugin_instance_name',
]);

/**
 * The key Kong adds inside every record holding a resolved `{vault://...}` reference, the
 * config itself and each record nested in it: Kong/kong 3.9.3 kong/db/schema/init.lua
 * `Schema:process_auto_fields` (on select, `data["$refs"] = refs`, reached for nested records
 * through `adjust_field_for_context`), so `config.redis.$refs` when `redis.password` is a reference.
 */
const REFS_KEY = '$refs';

/**
 * Kong's RPC to the plugin server gives up after nginx's 60 s socket read timeout (mp_rpc.lua
 * sets none), then proxies the request unrouted: every wait of one access phase stays below.
 */
export const KONG_RPC_TIMEOUT_MS = 60_000;
/** Room left for the rest of the access phase (refresh, Redis, PDK round trips). */
export const ACCESS_WAIT_BUDGET_MS = 55_000;

/**
 * The longest access phase a configuration asks for: a refresh, the wait for room (twice with
 * `anywhere`: for room anywhere, then on the replica), an unload to make it, the load. The
 * access deadline (ACCESS_WAIT_BUDGET_MS from arrival) ends it sooner in any case.
 */
export function accessWorstMs(
  c: Pick<RouterConfig, 'room_wait' | 'refresh_timeout_ms' | 'queue_timeout_ms' | 'load_timeout_ms'>,
): number {
  const waits = c.room_wait === 'anywhere' ? 2 : 1;
  return c.refresh_timeout_ms + waits * c.queue_timeout_ms + 2 * c.load_timeout_ms;
}

/** The plugin's own fields from what Kong hands to StartInstance, at every level of `fields`. */
export function withoutKongKeys(raw: unknown, fields?: SchemaFields): unknown {
  if (!isRecord(raw)) return raw;
  const own = Object.entries(raw).filter(([k]) => !KONG_KEYS.has(k) && !k.startsWith('__'));
  return fields ? withoutRefs(fields, Object.fromEntries(own)) : Object.fromEntries(own);
}

/** `$refs` dropped from a record and the records nested in it (through arrays and maps too). */
function withoutRefs(fields: SchemaFields, value: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const defs = new Map(fields.flatMap((e) => Object.entries(e)));
  for (const [k, v] of Object.entries(value)) {
    if (k === REFS_KEY) continue;
    const def = defs.get(k);
    out[k] = def ? withoutRefsIn(def, v) : v;
  }
  return out;
}

function withoutRefsIn(def: FieldDef, v: unknown): unknown {
  if (def.type === 'record' && def.fields && isRecord(v)) return withoutRefs(def.fields, v);
  if ((def.type === 'array' || def.type === 'set') && def.elements && Array.isArray(v))
    return v.map((e) => withoutRefsIn(def.elements!, e));
  if (def.type === 'map' && def.values && isRecord(v))
    return Object.fromEntries(Object.entries(v).map(([k, e]) => [k, withoutRefsIn(def.values!, e)]));
  return v;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * The router's config from what Kong hands to StartInstance; throws ConfigError. Deprecated
 * names in use are told to `onDeprecated` (each call: the caller decides how often to log).
 */
export function parseRouterConfig(raw: unknown, onDeprecated?: (message: string) => void): RouterConfig {
  const c = validateRecord(routerSchema, withoutKongKeys(raw, routerSchema)) as unknown as RouterConfig;
  const errors: { field: string; message: string }[] = [];
  c.redis = redisOf(c.redis, errors, onDeprecated);
  try {
    new RegExp(c.adapter_name_pattern);
  } catch (err) {
    errors.push({
      field: 'config.adapter_name_pattern',
      message: `not a valid regular expression: ${(err as Error).message}`,
    });
  }
  if (c.adapter_path_template !== undefined && !c.adapter_path_template.includes('{name}')) {
    errors.push({ field: 'config.adapter_path_template', message: 'must contain {name}' });
  }
  // Keyed by the normalised URL: one replica listed twice would get twice its adapter limit.
  // The message names fields only: it reaches clients (a 500 on every request), addresses must not.
  const urls = new Map<string, number>();
  c.replicas.forEach((r, i) => {
    r.url = normaliseReplicaUrl(r.url);
    const first = urls.get(r.url);
    if (first !== undefined)
      errors.push({
        field: `config.replicas[${i + 1}].url`,
        message: `the same replica as config.replicas[${first + 1}]`,
      });
    else urls.set(r.url, i);
  });
  const names = new Set<string>();
  c.adapters.forEach((a, i) => {
    if (names.has(a.name))
      errors.push({ field: `config.adapters[${i + 1}].name`, message: `duplicate adapter ${a.name}` });
    names.add(a.name);
    // vLLM reports the adapters it runs as names joined with ',': a loaded adapter named with one
    // could be seen running only as its pieces (the router reads such a name as busy whenever it
    // may be there, so it would hold its slot while anything like it runs).
    if (!a.static && a.name.includes(','))
      errors.push({
        field: `config.adapters[${i + 1}].name`,
        message: `may not contain ',' unless static: vLLM reports the adapters it runs as names joined with ','`,
      });
    if (a.name === c.base_model)
      errors.push({
        field: `config.adapters[${i + 1}].name`,
        message: 'an adapter cannot be named like the base model',
      });
  });
  const waits = c.room_wait === 'anywhere' ? 2 : 1;
  const worst = accessWorstMs(c);
  if (worst > ACCESS_WAIT_BUDGET_MS)
    errors.push({
      field: 'config.load_timeout_ms',
      message: `refresh_timeout_ms + ${waits > 1 ? '2 x queue_timeout_ms (room_wait: anywhere)' : 'queue_timeout_ms'} + 2 x load_timeout_ms (an unload, then the load) is ${worst} ms: it must stay within ${ACCESS_WAIT_BUDGET_MS} ms, as Kong gives up on the plugin server after ${KONG_RPC_TIMEOUT_MS / 1000} s and proxies the request unrouted`,
    });
  errors.push(...sloClassErrors(c));
  if (c.backoff_max_ms < c.backoff_base_ms)
    errors.push({ field: 'config.backoff_max_ms', message: 'must be >= backoff_base_ms' });
  if (errors.length > 0) throw new ConfigError(errors);
  return c;
}

/** `slo_classes` and what names them: unique names, named classes exist, a prediction to hold by. */
function sloClassErrors(c: RouterConfig): FieldError[] {
  const errors: FieldError[] = [];
  const names = new Set<string>();
  c.slo_classes.forEach((k, i) => {
    if (names.has(k.name))
      errors.push({ field: `config.slo_classes[${i + 1}].name`, message: `duplicate class ${k.name}` });
    names.add(k.name);
  });
  if (c.default_slo_class !== undefined && !names.has(c.default_slo_class))
    errors.push({
      field: 'config.default_slo_class',
      message: `no class ${c.default_slo_class} in slo_classes`,
    });
  for (const [consumer, name] of Object.entries(c.consumer_slo_class))
    if (!names.has(name))
      errors.push({
        field: `config.consumer_slo_class.${consumer}`,
        message: `no class ${name} in slo_classes`,
      });
  if (names.size > 0 && c.saturation_mode !== 'predicted')
    errors.push({
      field: 'config.slo_classes',
      message: 'needs saturation_mode: predicted (classes are held and shed by predicted TTFT)',
    });
  return errors;
}

/**
 * A replica URL as the router keys it: no trailing slash, scheme and host in lower case (both
 * are case-insensitive in URLs, RFC 3986 3.1 and 3.2.2); the schema's pattern guarantees the rest.
 */
export function normaliseReplicaUrl(url: string): string {
  const m = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/]+?)\/?$/.exec(url);
  return m ? `${m[1]!.toLowerCase()}://${m[2]!.toLowerCase()}` : url.replace(/\/$/, '');
}

/** The poller's config from what Kong hands to StartInstance; throws ConfigError. */
export function parsePollerConfig(raw: unknown, onDeprecated?: (message: string) => void): PollerConfig {
  const c = validateRecord(pollerSchema, withoutKongKeys(raw, pollerSchema)) as unknown as PollerConfig;
  const errors: FieldError[] = [];
  c.redis = redisOf(c.redis, errors, onDeprecated);
  if (errors.length > 0) throw new ConfigError(errors);
  return c;
}

function redisOf(
  raw: RedisConfig,
  errors: FieldError[],
  onDeprecated?: (message: string) => void,
): RedisConfig {
  const r = normalizeRedis(raw, 'config.redis');
  errors.push(...r.errors);
  for (const m of r.deprecations) onDeprecated?.(m);
  return r.config;
}
