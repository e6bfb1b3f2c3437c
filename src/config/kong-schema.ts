/**
 * Kong's plugin schema language, the subset our plugins use, and a validator that applies it
 * as Kong does: defaults filled in, nested records built from their fields' defaults, unknown
 * fields refused, errors keyed by field path. The plugin server exports the same Schema to
 * Kong, so a config Kong accepts is a config this parses, and tests can prove the rules
 * without a Kong binary.
 */

export type FieldType = 'string' | 'number' | 'integer' | 'boolean' | 'array' | 'set' | 'record' | 'map';

export interface FieldDef {
  type: FieldType;
  required?: boolean;
  default?: unknown;
  one_of?: (string | number)[];
  between?: [number, number];
  gt?: number;
  len_min?: number;
  len_max?: number;
  /** A Lua pattern (Kong's `match`), not a JS regex. */
  match?: string;
  elements?: FieldDef;
  fields?: SchemaFields;
  keys?: FieldDef;
  values?: FieldDef;
  /** Kong resolves `{vault://...}` references in this field before the plugin sees it. */
  referenceable?: boolean;
  /** Kong encrypts this field at rest when a keyring is configured. */
  encrypted?: boolean;
  /**
   * Kong logs `message` when the field is used (Kong/kong 3.9.3 kong/db/schema/metaschema.lua
   * `deprecation`; init.lua `validate_field`, not on data planes): an old name kept as an alias.
   */
  deprecation?: { message: string; removal_in_version: string };
  /** For the configuration reference (docs/configuration.md); stripped from the exported Schema (older Kong refuses it). */
  description?: string;
}

/** Kong's field list: an array of single-key maps, in order. */
export type SchemaFields = Record<string, FieldDef>[];

export interface FieldError {
  field: string;
  message: string;
}

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(readonly fieldErrors: FieldError[]) {
    super(`invalid configuration: ${fieldErrors.map((e) => `${e.field}: ${e.message}`).join('; ')}`);
  }
}

/** Validates `value` against `fields`; returns the config with defaults, or throws ConfigError. */
export function validateRecord(
  fields: SchemaFields,
  value: unknown,
  path = 'config',
): Record<string, unknown> {
  const errors: FieldError[] = [];
  const out = checkRecord(fields, value, path, errors);
  if (errors.length > 0) throw new ConfigError(errors);
  return out;
}

function checkRecord(
  fields: SchemaFields,
  value: unknown,
  path: string,
  errors: FieldError[],
  recordsRequired = true,
): Record<string, unknown> {
  const input = value === undefined || value === null ? {} : value;
  if (typeof input !== 'object' || Array.isArray(input)) {
    errors.push({ field: path, message: 'expected a record' });
    return {};
  }
  const given = input as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  const known = new Set<string>();
  for (const entry of fields) {
    for (const [name, def] of Object.entries(entry)) {
      known.add(name);
      const v = checkField(def, given[name], `${path}.${name}`, errors, { recordsRequired });
      if (v !== undefined) out[name] = v;
    }
  }
  for (const name of Object.keys(given)) {
    if (!known.has(name)) errors.push({ field: `${path}.${name}`, message: 'unknown field' });
  }
  return out;
}

interface Where {
  /**
   * Records here are required unless they say `required: false`: Kong/kong 3.9.3
   * kong/db/schema/entity.lua `make_records_required` marks the records of a plugin's schema
   * so, recursing through records only (not into array elements or map values).
   */
  recordsRequired: boolean;
  /** An array element or map value: Kong requires it (`validate_elements`, `validate_field` for maps). */
  member?: boolean;
}

/**
 * One field, as Kong/kong 3.9.3 kong/db/schema/init.lua treats it on insert:
 * `handle_missing_field` for an absent value (the default; else nothing unless required; a
 * required record built from its fields' defaults), then `validate_field` (null refused where
 * required).
 */
function checkField(
  def: FieldDef,
  value: unknown,
  path: string,
  errors: FieldError[],
  where: Where,
): unknown {
  const required = where.member || (def.required ?? (def.type === 'record' && where.recordsRequired));
  if (value === null && required) {
    errors.push({ field: path, message: 'required field missing' });
    return undefined;
  }
  if (value === undefined || value === null) {
    // An explicit null elsewhere is stored as null, which the plugin receives as absent: the
    // default then applies, as it does here.
    if (def.default !== undefined) value = structuredClone(def.default);
    else if (!required) return undefined;
    else if (def.type === 'record' && def.fields)
      return checkRecord(def.fields, {}, path, errors, where.recordsRequired);
    else {
      errors.push({ field: path, message: 'required field missing' });
      return undefined;
    }
  }
  const err = (message: string) => {
    errors.push({ field: path, message });
    return undefined;
  };
  switch (def.type) {
    case 'string': {
      if (typeof value !== 'string') return err('expected a string');
      // init.lua `validate_field`: "empty strings are not accepted by default" (len_min = 1
      // unless the field sets one); `make_length_validator` counts `#value`: bytes.
      const bytes = Buffer.byteLength(value, 'utf8');
      const lenMin = def.len_min ?? 1;
      if (bytes < lenMin) return err(`length must be at least ${lenMin}`);
      if (def.len_max !== undefined && bytes > def.len_max)
        return err(`length must be at most ${def.len_max}`);
      if (def.match !== undefined && !luaPattern(def.match).test(value))
        return err(`invalid value: ${value}`);
      break;
    }
    case 'number':
    case 'integer':
      if (typeof value !== 'number' || !Number.isFinite(value))
        return err(`expected ${def.type === 'integer' ? 'an integer' : 'a number'}`);
      if (def.type === 'integer' && !Number.isInteger(value)) return err('expected an integer');
      if (def.between && (value < def.between[0] || value > def.between[1])) {
        return err(`value should be between ${def.between[0]} and ${def.between[1]}`);
      }
      if (def.gt !== undefined && !(value > def.gt)) return err(`value must be greater than ${def.gt}`);
      break;
    case 'boolean':
      if (typeof value !== 'boolean') return err('expected a boolean');
      break;
    case 'array':
    case 'set': {
      // Lua cannot tell an empty array from an empty table: Kong sends {} for [].
      if (isEmptyObject(value)) value = [];
      if (!Array.isArray(value)) return err(`expected ${def.type === 'set' ? 'a set' : 'an array'}`);
      if (def.len_min !== undefined && value.length < def.len_min)
        return err(`length must be at least ${def.len_min}`);
      const items = value.map((v, i) =>
        def.elements
          ? checkField(def.elements, v, `${path}[${i + 1}]`, errors, { recordsRequired: false, member: true })
          : v,
      );
      if (def.type === 'set') return [...new Set(items)];
      return items;
    }
    case 'record':
      return checkRecord(def.fields ?? [], value, path, errors, where.recordsRequired && !where.member);
    case 'map': {
      if (typeof value !== 'object' || Array.isArray(value)) return err('expected a map');
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
        if (def.keys)
          checkField(def.keys, k, `${path}.<key>`, errors, { recordsRequired: false, member: true });
        out[k] = def.values
          ? checkField(def.values, v, `${path}.${k}`, errors, { recordsRequired: false, member: true })
          : v;
      }
      return out;
    }
  }
  if (def.one_of && !def.one_of.includes(value as string | number))
    return err(`expected one of: ${def.one_of.join(', ')}`);
  return value;
}

function isEmptyObject(v: unknown): boolean {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && Object.keys(v).length === 0;
}

const LUA_CLASSES: Record<string, string> = {
  a: 'A-Za-z',
  d: '0-9',
  l: 'a-z',
  u: 'A-Z',
  s: ' \\t\\n\\r\\f\\v',
  w: 'A-Za-z0-9',
  x: '0-9A-Fa-f',
  p: '!-\\/:-@\\[-`{-~',
};

const patternCache = new Map<string, RegExp>();

/** Translates a Lua pattern (the subset Kong schemas use) to an equivalent JS RegExp. */
export function luaPattern(pattern: string): RegExp {
  const cached = patternCache.get(pattern);
  if (cached) return cached;
  let re = '';
  let i = 0;
  const cls = (c: string, inSet: boolean): string => {
    const lower = c.toLowerCase();
    const body = LUA_CLASSES[lower];
    if (body === undefined) return '\\' + c; // %. %- %% etc.: the literal character
    if (c === lower) return inSet ? body : `[${body}]`;
    return inSet ? '' : `[^${body}]`; // %D, %W...: negated (not supported inside sets)
  };
  while (i < pattern.length) {
    const c = pattern[i]!;
    if (c === '%') {
      re += cls(pattern[i + 1] ?? '%', false);
      i += 2;
    } else if (c === '[') {
      let j = i + 1;
      let set = '[';
      if (pattern[j] === '^') {
        set += '^';
        j++;
      }
      while (j < pattern.length && pattern[j] !== ']') {
        if (pattern[j] === '%') {
          set += cls(pattern[j + 1] ?? '%', true);
          j += 2;
        } else {
          set += /[\\\]^]/.test(pattern[j]!) ? '\\' + pattern[j] : pattern[j];
          j++;
        }
      }
      re += set + ']';
      i = j + 1;
    } else if (c === '-') {
      re += '*?'; // Lua's lazy star
      i++;
    } else if ('^$*+?.'.includes(c)) {
      re += c;
      i++;
    } else {
      re += /[\\/{}|()]/.test(c) ? '\\' + c : c;
      i++;
    }
  }
  // Lua's match is unanchored unless the pattern says so, like RegExp.test.
  const compiled = new RegExp(re, 's');
  patternCache.set(pattern, compiled);
  return compiled;
}

/** The Schema as the plugin server exports it to Kong: descriptions removed. */
export function exportSchema(fields: SchemaFields): SchemaFields {
  return fields.map((entry) =>
    Object.fromEntries(Object.entries(entry).map(([name, def]) => [name, exportField(def)])),
  );
}

function exportField(def: FieldDef): FieldDef {
  const { description: _d, elements, fields, keys, values, ...rest } = def;
  const out: FieldDef = { ...rest };
  if (elements) out.elements = exportField(elements);
  if (fields) out.fields = exportSchema(fields);
  if (keys) out.keys = exportField(keys);
  if (values) out.values = exportField(values);
  return out;
}
