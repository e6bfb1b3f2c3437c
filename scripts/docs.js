// Regenerates README's configuration tables from the plugins' Schema, and its benchmark figures
// from bench/results/results.json (npm run docs).
const { readFileSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');
const { withConfigSection } = require('../dist/src/config/docs');
const { parseResults } = require('../dist/bench/goals');
const { withBenchSections } = require('../dist/bench/readme');

const root = join(__dirname, '..');
const path = join(root, 'README.md');
const results = parseResults(readFileSync(join(root, 'bench', 'results', 'results.json'), 'utf8'));
writeFileSync(path, withBenchSections(withConfigSection(readFileSync(path, 'utf8')), results));
console.log('README.md configuration tables and benchmark figures regenerated');
