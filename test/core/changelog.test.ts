import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';

const DIR = join(__dirname, '..', '..', 'changelog', 'unreleased');
const TYPES = ['feature', 'bugfix', 'performance', 'deprecation', 'breaking_change', 'dependency', 'docs'];
const SCOPES = ['lora-router', 'lora-poller', 'simulator', 'benchmark', 'project'];

describe('changelog fragments (changelog/README.md)', () => {
  const files = readdirSync(DIR).filter((f) => f.endsWith('.yml'));
  it.each(files)('%s has a message, a type and a scope', (file) => {
    const f = parse(readFileSync(join(DIR, file), 'utf8')) as Record<string, unknown>;
    expect(typeof f.message === 'string' && f.message.trim().length > 0).toBe(true);
    expect(TYPES).toContain(f.type);
    expect(SCOPES).toContain(f.scope);
  });
});
