import { SCORERS } from '../scheduler/scorers';
import type { ScorerDescriptor } from '../scheduler/types';
import type { FieldDef, SchemaFields } from './kong-schema';
import { pollerSchema } from './poller-schema';
import { routerSchema } from './router-schema';

/** Markdown table of a plugin's configuration, generated from its Schema (docs/configuration.md). */
export function configTable(fields: SchemaFields): string {
  const rows: string[] = ['| field | type | default | rules | description |', '|---|---|---|---|---|'];
  const walk = (fs: SchemaFields, prefix: string) => {
    for (const entry of fs) {
      for (const [name, def] of Object.entries(entry)) {
        const path = prefix + name;
        rows.push(
          `| \`${path}\` | ${typeName(def)} | ${def.default === undefined ? '' : `\`${JSON.stringify(def.default)}\``} | ${rules(def)} | ${def.description ?? ''} |`,
        );
        if (def.type === 'record' && def.fields) walk(def.fields, `${path}.`);
        if (
          (def.type === 'array' || def.type === 'set') &&
          def.elements?.type === 'record' &&
          def.elements.fields
        )
          walk(def.elements.fields, `${path}[].`);
      }
    }
  };
  walk(fields, '');
  return rows.join('\n');
}

function typeName(def: FieldDef): string {
  if ((def.type === 'array' || def.type === 'set') && def.elements)
    return `${def.type} of ${def.elements.type}`;
  return def.type;
}

function rules(def: FieldDef): string {
  const r: string[] = [];
  if (def.required) r.push('required');
  if (def.deprecation) r.push(`deprecated (removed in ${def.deprecation.removal_in_version})`);
  const oneOf = def.one_of ?? def.elements?.one_of;
  if (oneOf) r.push(`one of ${oneOf.map((v) => `\`${v}\``).join(', ')}`);
  if (def.between) r.push(`${def.between[0]}..${def.between[1]}`);
  if (def.gt !== undefined) r.push(`> ${def.gt}`);
  if (def.len_min !== undefined) r.push(`length >= ${def.len_min}`);
  if (def.len_max !== undefined) r.push(`length <= ${def.len_max}`);
  if (def.match) r.push(`matches \`${def.match}\` (Lua pattern)`);
  return r.join(', ');
}

/** docs/configuration.md's section between its markers: one table per plugin. */
export function configSection(): string {
  return [
    '## `lora-router`',
    '',
    configTable(routerSchema),
    '',
    '## `lora-poller`',
    '',
    configTable(pollerSchema),
  ].join('\n');
}

export const CONFIG_BEGIN = '<!-- config-table:begin (generated from the Schema: npm run docs) -->';
export const CONFIG_END = '<!-- config-table:end -->';

/** The configuration page (docs/configuration.md) with its generated section replaced. */
export function withConfigSection(page: string): string {
  const i = page.indexOf(CONFIG_BEGIN);
  const j = page.indexOf(CONFIG_END);
  if (i < 0 || j < i) throw new Error('docs/configuration.md has no config-table markers');
  return page.slice(0, i + CONFIG_BEGIN.length) + '\n' + configSection() + '\n' + page.slice(j);
}

/** The scorers' table (src/scheduler/scorers/README.md), generated from their descriptors. */
export function scorerTable(scorers: readonly ScorerDescriptor[]): string {
  const rows = [
    '| name | tendency | scores higher | reads | config key | default weight |',
    '|---|---|---|---|---|---|',
  ];
  for (const d of scorers)
    rows.push(
      `| \`${d.name}\`${d.experimental ? ' (experimental)' : ''} | ${d.tendency} | ${d.scoresHigher} | ${d.reads} | \`scorer_weights.${d.configKey}\` | ${d.defaultWeight} |`,
    );
  return rows.join('\n');
}

export const SCORERS_BEGIN = '<!-- scorer-table:begin (generated from the descriptors: npm run docs) -->';
export const SCORERS_END = '<!-- scorer-table:end -->';

/** The scorers' README with its table regenerated from `SCORERS`. */
export function withScorerTable(readme: string, scorers: readonly ScorerDescriptor[] = SCORERS): string {
  const i = readme.indexOf(SCORERS_BEGIN);
  const j = readme.indexOf(SCORERS_END);
  if (i < 0 || j < i) throw new Error('the scorers README has no scorer-table markers');
  return readme.slice(0, i + SCORERS_BEGIN.length) + '\n' + scorerTable(scorers) + '\n' + readme.slice(j);
}
