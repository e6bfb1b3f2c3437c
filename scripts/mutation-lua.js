// `npm run mutation:lua [-- leases budget ...] [--suites a,b] [--kinds k,...] [--lines L1-L2] [--survivors]`: mutation
// testing of the Redis store's Lua (src/fleet/redis/scripts/*.ts), which StrykerJS sees as string
// literals. Each mutant (scripts/mutation-lua/mutants.js: relational, arithmetic, and/or, not,
// constant +1, if true/false, a write statement dropped) is written to a copy of its script module
// under reports/mutation-lua/, and jest (scripts/mutation-lua/jest.config.js) resolves the module
// to that copy while it runs the suites that drive the scripts on a real redis-server; the first
// failing test kills it. Results are kept per script file (reports/mutation-lua/<file>.json,
// redone when the file changes), so a run can be stopped and resumed. Prints a table row per file
// and the survivors. docs/reliability/mutation-testing.md, "The Lua".
// MUTATION_CONCURRENCY=2 runs two mutants at once (each suite starts its own redis-server).
const { createHash } = require('node:crypto');
const { existsSync, mkdirSync, readFileSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');
const { spawn } = require('node:child_process');
const { setTimeout, clearTimeout } = require('node:timers');
const { apply, mutants } = require('./mutation-lua/mutants');

const root = join(__dirname, '..');
const scriptsDir = join(root, 'src', 'fleet', 'redis', 'scripts');
const reports = join(root, 'reports', 'mutation-lua');
// The safety files first (leases, residency, load and unload locks, the budget), then the rest.
const FILES = ['leases', 'residency', 'load-locks', 'budget', 'prelude', 'registration'];
// Fastest first (seconds a run on 2 shared cores, unmutated: 3, 3, 3, 13, 15, 30); all drive the scripts
// on a real redis-server started by the suite (harness/redis/server.ts).
const SUITES = [
  // The cases written for the survivors of the first run (docs/reliability/mutation-testing.md).
  'test/core/lua-scripts.test.ts',
  // The same for residency.ts (placement, the polls a snapshot applies or refuses).
  'test/core/lua-residency.test.ts',
  // The same for load-locks.ts (the grant of an unload: rooms, trims, unloads under way).
  'test/core/lua-load-locks.test.ts',
  // The same for prelude.ts (the locks' ends, a lease's drop, fences, the clock, the bounded lists).
  'test/core/lua-prelude.test.ts',
  // A load's end replayed after a lost write (finishLoad's 'replayed': dst seed 1534246).
  'test/core/replayed-load-end.test.ts',
  'test/core/mutation-ended-locks.test.ts',
  'test/core/mutation-redis-store.test.ts',
  'test/core/empty-restart.test.ts',
  'test/core/fleet-store.test.ts',
  'test/core/store-differential.test.ts',
];
const TIMEOUT_MS = Number(process.env.MUTATION_LUA_TIMEOUT_MS ?? 240_000);

function parseArgs(argv) {
  const opts = { files: [], suites: SUITES, kinds: null, lines: null, survivors: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--suites') opts.suites = argv[++i].split(',');
    else if (a === '--kinds') opts.kinds = new Set(argv[++i].split(','));
    else if (a === '--lines') opts.lines = argv[++i].split('-').map(Number);
    // The last run's survivors again (after new tests), the other results kept.
    else if (a === '--survivors') opts.survivors = true;
    // The suites just passed unmutated (an earlier file of the same run, same suites): no dry run.
    else if (a === '--no-dry-run') opts.noDryRun = true;
    else opts.files.push(a.replace(/\.ts$/, ''));
  }
  if (opts.files.length === 0) opts.files = FILES;
  return opts;
}

const keyOf = (m) => `${m.line}:${m.kind}:${m.start}:${m.description}`;

/** One jest run with the mutant in place: 'killed' (and by which suite), 'survived' or 'timeout'. */
function runMutant(file, mutantFile, suites) {
  return new Promise((resolve) => {
    const started = Date.now();
    const child = spawn(
      process.execPath,
      [
        join(root, 'node_modules', 'jest', 'bin', 'jest.js'),
        '-c',
        'scripts/mutation-lua/jest.config.js',
        '--bail',
        '--ci',
      ],
      {
        cwd: root,
        detached: true, // its own process group: a timeout ends the suites' redis-servers too
        env: {
          ...process.env,
          LUA_MUTANT_TARGET: join(scriptsDir, `${file}.ts`),
          LUA_MUTANT_FILE: mutantFile,
          LUA_MUTANT_SUITES: suites.join(','),
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }, TIMEOUT_MS);
    child.on('close', (code) => {
      clearTimeout(timer);
      const seconds = (Date.now() - started) / 1000;
      const failed = /^FAIL (\S+)/m.exec(output);
      const test = /^\s+● (.+)$/m.exec(output);
      // The failure's first lines: a kill for the wrong reason (a call timeout, a wall-clock bound) shows.
      const why = /^\s+● .+\n\n((?:.*\n){1,6})/m.exec(output)?.[1]?.replace(/\s+/g, ' ').trim();
      if (timedOut) resolve({ status: 'timeout', seconds });
      else if (code === 0) resolve({ status: 'survived', seconds });
      else
        resolve({
          status: 'killed',
          suite: failed?.[1],
          test: test?.[1],
          why,
          // ioredis gave up on a call (the suites' stores wait 200 ms by default, harness/redis/server.ts).
          commandTimedOut: /Command timed out/.test(output) || undefined,
          seconds,
          tail: code !== 1 ? output.slice(-2000) : undefined,
        });
    });
  });
}

async function runFile(file, opts) {
  const source = readFileSync(join(scriptsDir, `${file}.ts`), 'utf8');
  const hash = createHash('sha256').update(source).digest('hex').slice(0, 16);
  const reportFile = join(reports, `${file}.json`);
  let report = existsSync(reportFile) ? JSON.parse(readFileSync(reportFile, 'utf8')) : null;
  if (!report || report.hash !== hash)
    report = { file: `src/fleet/redis/scripts/${file}.ts`, hash, results: {} };
  const all = mutants(source).filter(
    (m) =>
      (!opts.kinds || opts.kinds.has(m.kind)) &&
      (!opts.lines || (m.line >= opts.lines[0] && m.line <= opts.lines[1])),
  );
  const todo = all.filter((m) => {
    const r = report.results[keyOf(m)];
    return !r || (opts.survivors && r.status === 'survived');
  });
  console.log(`${file}.ts: ${all.length} mutants, ${todo.length} to run`);
  let suites = [...opts.suites];
  const started = Date.now();
  // Once per run (the suites are the same for every file): the dry run checks the suites, not the file.
  if (todo.length > 0 && !opts.noDryRun) {
    opts.noDryRun = true;
    // The unmutated copy first, through the same resolver: a suite failing here would kill every mutant.
    const dir = join(reports, 'tmp', `${process.pid}-dry`);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, `${file}.ts`), source);
    let dry = await runMutant(file, join(dir, `${file}.ts`), suites);
    // The same call timeouts as a mutant's (below): once more before every mutant is called killed.
    if (dry.commandTimedOut) dry = await runMutant(file, join(dir, `${file}.ts`), suites);
    console.log(
      `  unmutated: ${dry.status === 'survived' ? 'passes' : dry.status} in ${dry.seconds.toFixed(1)} s`,
    );
    if (dry.status !== 'survived')
      throw new Error(
        `${file}.ts: the suites fail unmutated (${dry.suite ?? dry.status}: ${dry.test ?? ''})`,
      );
  }
  const concurrency = Number(process.env.MUTATION_CONCURRENCY ?? 1);
  let next = 0;
  const worker = async (w) => {
    const dir = join(reports, 'tmp', `${process.pid}-${w}`);
    mkdirSync(dir, { recursive: true });
    const mutantFile = join(dir, `${file}.ts`);
    while (next < todo.length) {
      const m = todo[next++];
      writeFileSync(mutantFile, apply(source, m));
      let r = await runMutant(file, mutantFile, suites);
      // Killed by a call that outlived the store's timeout: on 2 shared cores any test can meet one
      // (the harness's default is 200 ms a call), so the kill may say nothing of the mutant. Run once more;
      // a mutant that hangs Redis times out again and stays killed.
      if (r.status === 'killed' && r.commandTimedOut) {
        const first = r;
        r = { ...(await runMutant(file, mutantFile, suites)), retriedAfter: first.test };
        r.seconds += first.seconds;
      }
      // The suite that killed last goes first for the next mutant: neighbouring mutants share a killer.
      if (r.suite && suites.includes(r.suite)) suites = [r.suite, ...suites.filter((s) => s !== r.suite)];
      report.results[keyOf(m)] = { line: m.line, kind: m.kind, description: m.description, ...r };
      writeFileSync(reportFile, JSON.stringify(report, null, 1));
      console.log(
        `  ${String(m.line).padStart(4)} ${m.kind.padEnd(13)} ${r.status.padEnd(8)} ${r.seconds.toFixed(1).padStart(6)} s ${r.suite ?? ''}  ${m.description}`,
      );
    }
  };
  await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)));
  const results = all.map((m) => report.results[keyOf(m)]).filter(Boolean);
  const n = (s) => results.filter((r) => r.status === s).length;
  const killed = n('killed') + n('timeout');
  const elapsed = results.reduce((t, r) => t + r.seconds, 0);
  return {
    row: `| \`${file}.ts\`${opts.lines ? ` (lines ${opts.lines.join('-')})` : ''} | ${all.length} | ${results.length} | ${killed} (${n('timeout')}) | ${n('survived')} | ${results.length ? ((100 * killed) / results.length).toFixed(1) : '-'}% | ${Math.round(elapsed)} s |`,
    survivors: results.filter((r) => r.status === 'survived'),
    wall: (Date.now() - started) / 1000,
  };
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const unknown = opts.files.filter((f) => !FILES.includes(f));
  if (unknown.length) {
    console.error(`unknown script file(s) ${unknown.join(' ')}; known: ${FILES.join(' ')}`);
    process.exit(2);
  }
  mkdirSync(reports, { recursive: true });
  const rows = [];
  for (const file of opts.files) {
    const r = await runFile(file, opts);
    rows.push(r);
    for (const s of r.survivors) console.log(`  survived ${file}.ts:${s.line} ${s.kind}: ${s.description}`);
  }
  console.log('\n| file | mutants | run | killed (t/o) | survived | score | elapsed (sum of runs) |');
  console.log('| ---- | ------- | --- | ------------ | -------- | ----- | --------------------- |');
  for (const r of rows) console.log(r.row);
  for (const [i, file] of opts.files.entries()) {
    for (const s of rows[i].survivors) console.log(`- ${file}.ts:${s.line} ${s.kind}: ${s.description}`);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
