import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { withConfigSection } from '../../src/config/docs';

const ROOT = join(__dirname, '..', '..');
const readme = () => readFileSync(join(ROOT, 'README.md'), 'utf8');

describe('README', () => {
  it('documents the configuration exactly as the Schema defines it (run `npm run docs` after a schema change)', () => {
    // Prettier 3 cannot load inside jest's VM: format as `npm run docs` does, in a child process.
    const prettier = require.resolve('prettier/bin/prettier.cjs');
    const regenerated = execFileSync(process.execPath, [prettier, '--stdin-filepath', 'README.md'], {
      input: withConfigSection(readme()),
      cwd: ROOT,
    }).toString();
    expect(readme()).toBe(regenerated);
  });

  it('shows the two set-up commands', () => {
    expect(readme()).toContain('npm ci && npm start');
    expect(readme()).toContain('npm ci && npm test');
  });
});
