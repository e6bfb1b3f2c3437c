import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { configTable, scorerTable, withScorerTable } from '../../src/config/docs';
import type { SchemaFields } from '../../src/config/kong-schema';
import { parseRouterConfig } from '../../src/config/parse';
import { pollerSchema } from '../../src/config/poller-schema';
import { routerSchema, scorerWeightsField } from '../../src/config/router-schema';
import { defaultPipeline, pipelineFor, SchedulingPipeline } from '../../src/scheduler/pipeline';
import { SCORERS } from '../../src/scheduler/scorers';
import { defineScorer } from '../../src/scheduler/types';
import { prettier } from '../helpers/prettier';

/** Every field's path with its description, nested records and array elements included. */
function described(fields: SchemaFields, prefix = ''): [string, string | undefined][] {
  const out: [string, string | undefined][] = [];
  for (const entry of fields)
    for (const [name, def] of Object.entries(entry)) {
      out.push([prefix + name, def.description]);
      if (def.type === 'record' && def.fields) out.push(...described(def.fields, `${prefix}${name}.`));
      if (def.elements?.type === 'record' && def.elements.fields)
        out.push(...described(def.elements.fields, `${prefix}${name}[].`));
    }
  return out;
}

const defaults = () => parseRouterConfig({ replicas: [{ url: 'http://10.0.0.1:8000' }] });

describe('the default pipeline', () => {
  it("is the router's for the default configuration: no `room` filter unless `room_wait: anywhere`", () => {
    expect(defaultPipeline.filters).not.toContain('room');
    expect(defaultPipeline).toEqual(pipelineFor(defaults()));
    expect(pipelineFor({ ...defaults(), room_wait: 'anywhere' }).filters).toContain('room');
  });
});

describe('scorer descriptors', () => {
  const extra = defineScorer({
    name: 'short-queue',
    configKey: 'short_queue',
    defaultWeight: 3,
    tendency: 'distribution',
    scoresHigher: 'fewer running requests',
    reads: '`running`',
    experimental: true,
    create: () => ({ name: 'short-queue', score: (_r, cs) => cs.map(() => 1) }),
  });

  it('build the schema: one `scorer_weights` field per descriptor, with its default and description', () => {
    const field = scorerWeightsField([...SCORERS, extra]);
    const table = configTable([{ scorer_weights: field }]);
    expect(table).toContain(
      '| `scorer_weights.short_queue` | number | `3` | 0..100 | Experimental. `short-queue`',
    );
    expect(routerSchema.find((f) => 'scorer_weights' in f)).toEqual({
      scorer_weights: scorerWeightsField(SCORERS),
    });
    // The typed config carries every descriptor's weight, at its default.
    expect(defaults().scorer_weights).toEqual(
      Object.fromEntries(SCORERS.map((d) => [d.configKey, d.defaultWeight])),
    );
  });

  it("build the scorers' docs table, and the committed README follows the list (`npm run docs`)", () => {
    expect(scorerTable([...SCORERS, extra])).toContain(
      '| `short-queue` (experimental) | distribution | fewer running requests | `running` | `scorer_weights.short_queue` | 3 |',
    );
    const path = join(__dirname, '..', '..', 'src', 'scheduler', 'scorers', 'README.md');
    const readme = readFileSync(path, 'utf8');
    expect(readme).toBe(prettier(withScorerTable(readme), path));
    for (const d of SCORERS) expect(readme).toContain(`\`scorer_weights.${d.configKey}\``);
  });

  it('build the pipeline: every descriptor is a unit, weighted from its config key', () => {
    const config = { ...defaults(), scorer_weights: { ...defaults().scorer_weights } };
    for (const d of SCORERS) config.scorer_weights[d.configKey] = 1;
    const profile = pipelineFor(config);
    expect(profile.scorers).toEqual(SCORERS.map((d) => ({ name: d.name, weight: 1 })));
    expect(() => new SchedulingPipeline(profile)).not.toThrow();
  });
});

describe('schema descriptions', () => {
  it.each([
    ['lora-router', routerSchema],
    ['lora-poller', pollerSchema],
  ])('%s describes every field', (_name, schema) => {
    expect(
      described(schema)
        .filter(([, d]) => !d?.trim())
        .map(([p]) => p),
    ).toEqual([]);
  });

  it('mark the experimental options as such', () => {
    const text = JSON.stringify(described(routerSchema));
    for (const d of SCORERS.filter((s) => s.experimental))
      expect(described(routerSchema)).toContainEqual([
        `scorer_weights.${d.configKey}`,
        expect.stringMatching(/^Experimental\./),
      ]);
    expect(text).toMatch(/`anywhere` \(experimental\)/);
    expect(text).toMatch(/`value` \(experimental/);
  });
});
