// Regenerates README's configuration tables from the plugins' Schema (npm run docs).
const { readFileSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');
const { withConfigSection } = require('../dist/src/config/docs');

const path = join(__dirname, '..', 'README.md');
writeFileSync(path, withConfigSection(readFileSync(path, 'utf8')));
console.log('README.md configuration tables regenerated');
