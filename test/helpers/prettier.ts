import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..');

/** As `npm run docs` formats a markdown file: Prettier 3 cannot load inside jest's VM, so in a child process. */
export function prettier(text: string, filepath = 'README.md'): string {
  const bin = require.resolve('prettier/bin/prettier.cjs');
  return execFileSync(process.execPath, [bin, '--stdin-filepath', filepath], {
    input: text,
    cwd: ROOT,
  }).toString();
}
