// Regenerates README's configuration tables from the plugins' Schema, its benchmark figures
// from bench/results/results.json, the scorers' table from their descriptors,
// and docs/errors.md from the error catalogue (npm run docs).
const { readFileSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');
const { withConfigSection, withScorerTable } = require('../dist/src/config/docs');
const { errorsDoc } = require('../dist/src/errors');
const { parseResults } = require('../dist/bench/goals');
const { withBenchSections } = require('../dist/bench/readme');

const root = join(__dirname, '..');
const path = join(root, 'README.md');
const results = parseResults(readFileSync(join(root, 'bench', 'results', 'results.json'), 'utf8'));
writeFileSync(path, withBenchSections(withConfigSection(readFileSync(path, 'utf8')), results));
const scorers = join(root, 'src', 'scheduler', 'scorers', 'README.md');
writeFileSync(scorers, withScorerTable(readFileSync(scorers, 'utf8')));
writeFileSync(join(root, 'docs', 'errors.md'), errorsDoc());
console.log(
  'README.md configuration tables and benchmark figures, the scorers table and docs/errors.md regenerated',
);
