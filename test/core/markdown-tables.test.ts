import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { tableCells, tableProblems } from '../helpers/markdown-tables';

const ROOT = join(__dirname, '..', '..');

describe('Markdown tables render as written', () => {
  it('the check finds what breaks a table: a missing delimiter row, a stray one, a pipe in a cell', () => {
    expect(tableCells('| `a\\|b` | c |')).toEqual(['`a\\|b`', 'c']);
    expect(tableProblems('| a | b |\n| x | y |')).toEqual([
      { line: 2, problem: 'no delimiter row after the header' },
    ]);
    expect(tableProblems('| a | b |\n| - | - |\n| --- | --- |\n| x | y |')).toEqual([
      { line: 3, problem: 'a delimiter row among the body rows' },
    ]);
    expect(tableProblems('| a | b |\n| - | - |\n| `x|y` | z |')).toEqual([
      { line: 3, problem: '3 cells, the header has 2' },
    ]);
    expect(tableProblems('```\n| a |\n| b |\n```')).toEqual([]);
  });

  const files = execFileSync('git', ['ls-files', '*.md'], { cwd: ROOT })
    .toString()
    .split('\n')
    .filter((f) => f !== '' && !f.startsWith('changelog/'));

  it.each(files)('%s', (file) => {
    expect(tableProblems(readFileSync(join(ROOT, file), 'utf8'))).toEqual([]);
  });
});
