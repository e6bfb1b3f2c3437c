// Regenerates the configuration reference (docs/configuration.md) from the plugins' Schema, the
// benchmark page's figures (docs/benchmarks.md) from bench/results/results.json, the scorers'
// table from their descriptors, and docs/errors.md from the error catalogue (npm run docs).
const { readFileSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');
const { withConfigSection, withScorerTable } = require('../dist/src/config/docs');
const { errorsDoc } = require('../dist/src/errors');
const { parseResults } = require('../dist/bench/goals');
const { BENCH_PAGE, withBenchSections } = require('../dist/bench/readme');

const root = join(__dirname, '..');
const rewrite = (file, f) => writeFileSync(join(root, file), f(readFileSync(join(root, file), 'utf8')));
const results = parseResults(readFileSync(join(root, 'bench', 'results', 'results.json'), 'utf8'));
rewrite('docs/configuration.md', withConfigSection);
rewrite(BENCH_PAGE, (page) => withBenchSections(page, results));
rewrite('src/scheduler/scorers/README.md', withScorerTable);
writeFileSync(join(root, 'docs', 'errors.md'), errorsDoc());
console.log(
  `docs/configuration.md, the figures of ${BENCH_PAGE}, the scorers table and docs/errors.md regenerated`,
);
