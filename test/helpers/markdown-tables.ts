/**
 * GFM tables as GitHub renders them (github.github.com/gfm, "Tables (extension)"): a header
 * row, then a delimiter row of `---` cells, then body rows; cells split on every `|` not
 * escaped as `\|`, inside code spans too. What a table needs to render as its author meant.
 */
export interface TableProblem {
  line: number;
  problem: string;
}

const DELIMITER_CELL = /^:?-+:?$/;

/** A row's cells: leading and trailing pipes dropped, split on unescaped pipes. */
export function tableCells(line: string): string[] {
  let s = line.trim();
  if (s.startsWith('|')) s = s.slice(1);
  if (s.endsWith('|') && !s.endsWith('\\|')) s = s.slice(0, -1);
  const cells: string[] = [];
  let cell = '';
  for (let i = 0; i < s.length; i++) {
    if (s[i] === '\\' && s[i + 1] === '|') {
      cell += '\\|';
      i++;
    } else if (s[i] === '|') {
      cells.push(cell.trim());
      cell = '';
    } else cell += s[i];
  }
  cells.push(cell.trim());
  return cells;
}

/**
 * Every table of a Markdown text (outside fenced code): a delimiter row second, as many
 * cells in every row as in the header (GitHub drops extra cells and pads missing ones), and
 * no second delimiter row among the body rows (it renders as a row of dashes).
 */
export function tableProblems(markdown: string): TableProblem[] {
  const lines = markdown.split('\n');
  const problems: TableProblem[] = [];
  let fenced = false;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    if (fenced || !line.trimStart().startsWith('|')) continue;
    const start = i;
    const rows: string[][] = [];
    while (i < lines.length && lines[i]!.trimStart().startsWith('|')) rows.push(tableCells(lines[i++]!));
    const width = rows[0]!.length;
    const isDelimiter = (r: string[] | undefined) =>
      r !== undefined && r.every((c) => DELIMITER_CELL.test(c));
    if (!isDelimiter(rows[1]))
      problems.push({ line: start + 2, problem: 'no delimiter row after the header' });
    rows.forEach((r, k) => {
      if (r.length !== width)
        problems.push({ line: start + k + 1, problem: `${r.length} cells, the header has ${width}` });
      if (k > 1 && isDelimiter(r))
        problems.push({ line: start + k + 1, problem: 'a delimiter row among the body rows' });
    });
  }
  return problems;
}
