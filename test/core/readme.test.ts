import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseResults } from '../../bench/goals';
import { REGIONS, withBenchSections } from '../../bench/readme';
import { withConfigSection } from '../../src/config/docs';
import { prettier } from '../helpers/prettier';

const ROOT = join(__dirname, '..', '..');
const readme = () => readFileSync(join(ROOT, 'README.md'), 'utf8');
const results = () => parseResults(readFileSync(join(ROOT, 'bench', 'results', 'results.json'), 'utf8'));

describe('README', () => {
  it('documents the configuration exactly as the Schema defines it (run `npm run docs` after a schema change)', () => {
    expect(readme()).toBe(prettier(withConfigSection(readme())));
  });

  it('shows exactly the benchmark figures bench/results/results.json holds (`npm run bench` or `npm run docs` regenerates them)', () => {
    expect(readme()).toBe(prettier(withBenchSections(readme(), results())));
  });

  it('states the commit the published results were measured at', () => {
    const r = results();
    expect(r.commit?.sha).toMatch(/^[0-9a-f]{40}$/);
    expect(readme()).toContain(`\`${r.commit!.sha.slice(0, 12)}\``);
  });

  it('generates each benchmark region from the results: a changed figure changes the README', () => {
    const r = results();
    const before = withBenchSections(readme(), r);
    // Every region has markers, and a figure in the results shows in the README.
    expect(Object.keys(REGIONS).sort()).toEqual(['benchmarks', 'redis-cost']);
    r.nodes!.redisCost.redis.accessP50 += 1.2345;
    r.quality![0]!.results[0]!.errors += 1000;
    expect(withBenchSections(readme(), r)).not.toBe(before);
  });

  it('shows the two set-up commands', () => {
    expect(readme()).toContain('npm ci && npm start');
    expect(readme()).toContain('npm ci && npm test');
  });
});
