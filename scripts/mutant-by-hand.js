// `node scripts/mutant-by-hand.js <report.json> <file> <test file> <mutant id>...`: applies each
// mutant of a Stryker JSON report (reports/mutation/<file>.json, from `npm run mutation:safety`) to
// the file alone, runs the test file against it (niced, 90 s bound: a mutant that hangs the suite
// counts as killed), restores the file, and prints KILLED with the failing cases, or SURVIVED. The
// mutant is found by its text and 80 characters either side, so the file may have changed elsewhere
// since the report. How docs/reliability.md's "by hand" rows were measured.
const { readFileSync, writeFileSync } = require('node:fs');
const { spawnSync } = require('node:child_process');
const { resolve } = require('node:path');

const [report, file, test, ...ids] = process.argv.slice(2);
if (!report || !file || !test || ids.length === 0) {
  console.error('usage: node scripts/mutant-by-hand.js <report.json> <file> <test file> <mutant id>...');
  process.exit(2);
}
const entry = JSON.parse(readFileSync(resolve(report), 'utf8')).files[file];
if (!entry) {
  console.error(`${report} has no ${file}`);
  process.exit(2);
}
const lines = entry.source.split('\n');
const offset = (p) => lines.slice(0, p.line - 1).reduce((n, l) => n + l.length + 1, 0) + p.column - 1;
const original = readFileSync(file, 'utf8');
const flat = (t) => t.replace(/\s+/g, ' ').slice(0, 60);

for (const id of ids) {
  const m = entry.mutants.find((x) => x.id === id);
  if (!m) {
    console.log(`${id}: no such mutant`);
    continue;
  }
  const a = offset(m.location.start);
  const b = offset(m.location.end);
  const from = Math.max(0, a - 80);
  const context = entry.source.slice(from, b + 80);
  const at = original.indexOf(context);
  if (at < 0 || original.indexOf(context, at + 1) >= 0) {
    console.log(`${id}: its text is no longer in ${file} once`);
    continue;
  }
  const start = at + (a - from);
  console.log(
    `${id} L${m.location.start.line} ${m.mutatorName}: ${flat(entry.source.slice(a, b))} -> ${flat(m.replacement)}`,
  );
  writeFileSync(file, original.slice(0, start) + m.replacement + original.slice(start + (b - a)));
  try {
    const run = spawnSync('nice', ['-n', '19', 'npx', 'jest', test], { encoding: 'utf8', timeout: 90_000 });
    const out = `${run.stdout}${run.stderr}`;
    if (run.error) console.log('  KILLED (the suite hung: 90 s)');
    else if (run.status === 0) console.log('  SURVIVED');
    else {
      const failed = out
        .split('\n')
        .filter((l) => /^\s+● /.test(l))
        .slice(0, 3);
      const seen = out
        .split('\n')
        .filter((l) => /^\s+(Expected|Received)/.test(l))
        .slice(0, 2);
      console.log(`  KILLED: ${failed.map((l) => l.trim().slice(2)).join(' | ')}`);
      for (const l of seen) console.log(`    ${l.trim()}`);
    }
  } finally {
    writeFileSync(file, original);
  }
}
