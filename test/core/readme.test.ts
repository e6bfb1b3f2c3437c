import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseResults } from '../../bench/goals';
import { BENCH_PAGE, REGIONS, withBenchSections } from '../../bench/readme';
import { withConfigSection } from '../../src/config/docs';
import { prettier } from '../helpers/prettier';

const ROOT = join(__dirname, '..', '..');
const read = (file: string) => readFileSync(join(ROOT, file), 'utf8');
const configPage = () => read('docs/configuration.md');
const benchPage = () => read(BENCH_PAGE);
const results = () => parseResults(read('bench/results/results.json'));

describe('generated documentation', () => {
  it('docs/configuration.md documents the configuration exactly as the Schema defines it (run `npm run docs` after a schema change)', () => {
    expect(configPage()).toBe(prettier(withConfigSection(configPage()), 'docs/configuration.md'));
  });

  it('docs/benchmarks.md shows exactly the benchmark figures bench/results/results.json holds (`npm run bench` or `npm run docs` regenerates them)', () => {
    expect(benchPage()).toBe(prettier(withBenchSections(benchPage(), results()), BENCH_PAGE));
  });

  it('docs/benchmarks.md states the commit the published results were measured at', () => {
    const r = results();
    expect(r.commit?.sha).toMatch(/^[0-9a-f]{40}$/);
    expect(benchPage()).toContain(`\`${r.commit!.sha.slice(0, 12)}\``);
  });

  it('generates each benchmark region from the results: a changed figure changes the page', () => {
    const r = results();
    const before = withBenchSections(benchPage(), r);
    // Every region has markers, and a figure in the results shows on the page.
    expect(Object.keys(REGIONS).sort()).toEqual(['benchmarks', 'redis-cost']);
    r.nodes!.redisCost.redis.accessP50 += 1.2345;
    r.quality![0]!.results[0]!.errors += 1000;
    expect(withBenchSections(benchPage(), r)).not.toBe(before);
  });

  it('links from the benchmark page (in docs/) to the results one folder up', () => {
    const page = withBenchSections(benchPage(), results());
    expect(page).toContain('](../bench/results/README.md#');
    expect(page).not.toMatch(/\]\(bench\//);
  });

  it('README points to the generated pages', () => {
    expect(read('README.md')).toContain('docs/configuration.md');
    expect(read('README.md')).toContain(BENCH_PAGE);
  });
});
