/**
 * Kong's secret references, as a data plane resolves them before a plugin sees its config:
 * `Schema:process_auto_fields` on select (Kong/kong 3.9.3 kong/db/schema/init.lua) replaces each
 * `{vault://...}` in a `referenceable` string field with the secret and records the reference
 * in a `$refs` key of the record holding the field (`collect_field_reference`, then
 * `data["$refs"] = refs`). Records nested in the config are processed the same way
 * (`adjust_field_for_context` recurses into them), so a reference in `config.redis.password`
 * yields `config.redis.$refs = { password = "{vault://...}" }`. Only the `env` vault is played:
 * kong/vaults/env/init.lua (3.9.3) reads `upper(gsub(resource, "-", "_"))` from the environment.
 * References in arrays and maps of strings (`collect_subfield_reference`) are not played: the
 * plugins have no such field.
 */
import type { FieldDef, SchemaFields } from '../../src/config/kong-schema';

/** kong/pdk/vault.lua (3.9.3) `is_reference`: a string starting with `{vault:`. */
export function isReference(v: unknown): v is string {
  return typeof v === 'string' && v.startsWith('{vault:');
}

/** `{vault://env/<name>}` from `env`; anything else (or an unset variable) stays unresolved. */
export function envVault(env: NodeJS.ProcessEnv = process.env): (ref: string) => string | undefined {
  return (ref) => {
    const m = /^\{vault:\/\/env\/([^/}]+)\}$/.exec(ref);
    return m ? env[m[1]!.replace(/-/g, '_').toUpperCase()] : undefined;
  };
}

/** `config` with its references resolved and `$refs` added where Kong adds them. */
export function resolveReferences(
  fields: SchemaFields,
  config: Record<string, unknown>,
  lookup: (ref: string) => string | undefined,
): Record<string, unknown> {
  const out: Record<string, unknown> = { ...config };
  let refs: Record<string, string> | undefined;
  for (const entry of fields)
    for (const [name, def] of Object.entries(entry) as [string, FieldDef][]) {
      const v = out[name];
      if (def.type === 'string' && def.referenceable && isReference(v)) {
        (refs ??= {})[name] = v;
        // Kong: `resolve_reference` returns nil on failure, and the field is then nil.
        out[name] = lookup(v) ?? null;
      } else if (def.type === 'record' && def.fields && typeof v === 'object' && v !== null)
        out[name] = resolveReferences(def.fields, v as Record<string, unknown>, lookup);
    }
  if (refs) out.$refs = refs;
  return out;
}
