/**
 * The local validator applies Kong's rules, so a config it accepts is one Kong accepts: each
 * rule below cites where Kong/kong 3.9.3 encodes it.
 */
import { ConfigError, validateRecord, type SchemaFields } from '../../src/config/kong-schema';
import { parsePollerConfig, parseRouterConfig } from '../../src/config/parse';

function fieldErrors(fn: () => unknown): Record<string, string> {
  try {
    fn();
  } catch (e) {
    if (e instanceof ConfigError) return Object.fromEntries(e.fieldErrors.map((f) => [f.field, f.message]));
    throw e;
  }
  throw new Error('config was accepted');
}

const replicas = [{ url: 'http://a:1' }];

describe("Kong's schema rules, mirrored", () => {
  // kong/db/schema/init.lua `Schema:validate_field`: "empty strings are not accepted by
  // default": a string field without `len_min` gets `len_min = 1`.
  it('refuses an empty string where the field sets no len_min', () => {
    expect(fieldErrors(() => validateRecord([{ s: { type: 'string' } }], { s: '' }))).toEqual({
      'config.s': 'length must be at least 1',
    });
    expect(fieldErrors(() => parseRouterConfig({ replicas, base_model: '' }))).toEqual({
      'config.base_model': 'length must be at least 1',
    });
    expect(fieldErrors(() => parsePollerConfig({ redis: { host: '' } }))).toEqual({
      'config.redis.host': 'length must be at least 1',
    });
  });

  // The same line sets len_min only when the field has none: an explicit `len_min = 0` (Kong's
  // own Redis `password`, kong/tools/redis/schema.lua) accepts "".
  it('accepts an empty string where the field says len_min = 0', () => {
    expect(validateRecord([{ s: { type: 'string', len_min: 0 } }], { s: '' })).toEqual({ s: '' });
  });

  // `make_length_validator`: `local len = #value`, Lua's length of a string, in bytes.
  it('counts string lengths in bytes, as Lua does', () => {
    const fields: SchemaFields = [{ s: { type: 'string', len_max: 3 } }];
    expect(validateRecord(fields, { s: 'abc' })).toEqual({ s: 'abc' });
    expect(fieldErrors(() => validateRecord(fields, { s: 'éé' }))).toEqual({
      'config.s': 'length must be at most 3',
    });
    expect(fieldErrors(() => validateRecord([{ s: { type: 'string', len_min: 3 } }], { s: 'é' }))).toEqual({
      'config.s': 'length must be at least 3',
    });
  });

  // kong/db/schema/entity.lua `make_records_required`: records in a plugin's schema are
  // required unless they say otherwise; `handle_missing_field` builds a missing required record
  // from its fields' defaults, and `validate_field` refuses `null` for it ("required field missing").
  it('fills a missing nested record from its defaults but refuses it set to null', () => {
    expect(parsePollerConfig({}).redis.port).toBe(6379);
    expect(fieldErrors(() => parsePollerConfig({ redis: null }))).toEqual({
      'config.redis': 'required field missing',
    });
    expect(fieldErrors(() => parseRouterConfig({ replicas, scorer_weights: null }))).toEqual({
      'config.scorer_weights': 'required field missing',
    });
  });

  // `handle_missing_field`: a record that is not required is null when missing, not built.
  it('leaves a missing record declared required: false unset', () => {
    const fields: SchemaFields = [
      { r: { type: 'record', required: false, fields: [{ n: { type: 'integer', default: 1 } }] } },
    ];
    expect(validateRecord(fields, {})).toEqual({});
    expect(validateRecord(fields, { r: null })).toEqual({});
    expect(validateRecord(fields, { r: {} })).toEqual({ r: { n: 1 } });
  });

  // `validate_elements` sets `field.elements.required = true`: a null element is refused.
  it('refuses a null array element', () => {
    expect(fieldErrors(() => parseRouterConfig({ replicas: [{ url: 'http://a:1' }, null] }))).toEqual({
      'config.replicas[2]': 'required field missing',
    });
    expect(
      fieldErrors(() =>
        validateRecord([{ a: { type: 'array', elements: { type: 'string' } } }], { a: [null] }),
      ),
    ).toEqual({ 'config.a[1]': 'required field missing' });
  });

  // `validate_field` for maps: `field.values.required = true`.
  it('refuses a null map value', () => {
    const fields: SchemaFields = [
      { m: { type: 'map', keys: { type: 'string' }, values: { type: 'integer' } } },
    ];
    expect(validateRecord(fields, { m: { a: 1 } })).toEqual({ m: { a: 1 } });
    expect(fieldErrors(() => validateRecord(fields, { m: { a: null } }))).toEqual({
      'config.m.a': 'required field missing',
    });
  });

  // kong/db/schema/init.lua `process_auto_fields` (select): `data["$refs"] = refs` in every
  // record holding a resolved reference, the config and the records nested in it.
  it('ignores the $refs key Kong adds beside resolved references, at every level', () => {
    const c = parsePollerConfig({
      $refs: { other: '{vault://env/x}' },
      redis: { host: 'r', password: 'secret', $refs: { password: '{vault://env/redis-password}' } },
      __plugin_id: 'p',
    });
    expect(c.redis).toMatchObject({ host: 'r', password: 'secret' });
    expect(c.redis).not.toHaveProperty('$refs');
  });
});
