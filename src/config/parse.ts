import { ConfigError, validateRecord } from './kong-schema';
import { pollerSchema, type PollerConfig } from './poller-schema';
import { routerSchema, type RouterConfig } from './router-schema';

/** Keys Kong adds to a plugin's config when it starts an instance (not part of the schema). */
const KONG_KEYS = new Set(['route_id', 'service_id', 'consumer_id', 'consumer_group_id']);

/** The plugin's own fields from what Kong hands to StartInstance. */
export function withoutKongKeys(raw: unknown): unknown {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return raw;
  return Object.fromEntries(Object.entries(raw).filter(([k]) => !KONG_KEYS.has(k) && !k.startsWith('__')));
}

export function parseRouterConfig(raw: unknown): RouterConfig {
  const c = validateRecord(routerSchema, withoutKongKeys(raw)) as unknown as RouterConfig;
  const errors: { field: string; message: string }[] = [];
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
  const urls = new Set<string>();
  c.replicas.forEach((r, i) => {
    r.url = r.url.replace(/\/$/, '');
    if (urls.has(r.url))
      errors.push({ field: `config.replicas[${i + 1}].url`, message: `duplicate replica ${r.url}` });
    urls.add(r.url);
  });
  const names = new Set<string>();
  c.adapters.forEach((a, i) => {
    if (names.has(a.name))
      errors.push({ field: `config.adapters[${i + 1}].name`, message: `duplicate adapter ${a.name}` });
    names.add(a.name);
    if (a.name === c.base_model)
      errors.push({
        field: `config.adapters[${i + 1}].name`,
        message: 'an adapter cannot be named like the base model',
      });
  });
  if (c.backoff_max_ms < c.backoff_base_ms)
    errors.push({ field: 'config.backoff_max_ms', message: 'must be >= backoff_base_ms' });
  if (errors.length > 0) throw new ConfigError(errors);
  return c;
}

export function parsePollerConfig(raw: unknown): PollerConfig {
  return validateRecord(pollerSchema, withoutKongKeys(raw)) as unknown as PollerConfig;
}
