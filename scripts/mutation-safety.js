// `npm run mutation:safety [-- file ...]`: StrykerJS over the safety files of src/fleet, src/adapters
// and src/router, one file at a time against the in-process suites aimed at it (the whole three
// folders against every suite is a run of many hours on 2 shared cores: docs/reliability/mutation-testing.md).
// Each file keeps its own incremental file and JSON report under reports/mutation/, so a run
// resumes where it stopped and a rerun costs only what changed; a summary row is printed per
// file (the table in docs/reliability/mutation-testing.md). Arguments select files by a part of
// their path (`-- room-wait manager`); none runs them all, in the order below.
const { copyFileSync, existsSync, mkdirSync, readFileSync } = require('node:fs');
const { basename, join } = require('node:path');
const { spawnSync } = require('node:child_process');

const root = join(__dirname, '..');
const reports = join(root, 'reports', 'mutation');

const core = (...names) => names.map((n) => (n.includes('/') ? `test/${n}` : `test/core/${n}`) + '.test.ts');

/** Safety file → the suites that guard it (fast, in-process; a real redis-server where named). */
const TARGETS = [
  ['src/router/room-wait.ts', core('room-wait', 'slo-classes', 'mutation-room-wait')],
  ['src/router/cold-budget.ts', core('mutation-cold-budget')],
  ['src/adapters/manager.ts', core('adapter-manager', 'shared-races', 'access-deadline', 'mutation-manager')],
  // Split out of manager.ts after the run reported in docs/reliability/mutation-testing.md (the same suites guard it).
  ['src/adapters/room.ts', core('adapter-manager', 'shared-races', 'access-deadline', 'mutation-manager')],
  // The load call's life and how calls end, split out of manager.ts after that run too (the same suites).
  [
    'src/adapters/load-call.ts',
    core('adapter-manager', 'shared-races', 'access-deadline', 'mutation-manager'),
  ],
  [
    'src/adapters/call-end.ts',
    core('adapter-manager', 'shared-races', 'access-deadline', 'mutation-manager'),
  ],
  [
    'src/fleet/redis/held-leases.ts',
    core('shared-faults', 'empty-restart', 'failover-recovery', 'runtime-handover', 'mutation-held-leases'),
  ],
  [
    'src/fleet/redis/outage.ts',
    // emptied-hold-off: stateEmptied telling onSharedAgain (dst seed 1534246).
    core(
      'shared-faults',
      'empty-restart',
      'failover-recovery',
      'failover-clock',
      'mutation-outage',
      'emptied-hold-off',
    ),
  ],
  [
    'src/fleet/redis/failover-store.ts',
    core(
      'failover-store',
      'failover-recovery',
      'failover-clock',
      'empty-restart',
      'shared-faults',
      'runtime-handover',
      'mutation-failover-store',
      'hand-back-close',
    ),
  ],
  // Its unit suites and the review suites over a real redis-server (10-15 s a run): the run in
  // docs/reliability/mutation-testing.md. failover-store, failover-recovery, empty-restart and
  // shared-faults (40-115 s a run, bound by the wall clock) are left out for time.
  [
    'src/fleet/redis/recovering-store.ts',
    core(
      'mutation-failover-store',
      'reclaim-in-flight',
      'reclaim-views',
      'recovery-wait',
      'failover-review',
      'failover-review-57',
      'failover-leftovers',
      'failover-suspects',
      'hand-back-close',
    ),
  ],
  [
    'src/fleet/redis/degradable-store.ts',
    core(
      'failover-store',
      'failover-clock',
      'empty-restart',
      'shared-faults',
      'failover-recovery',
      'mutation-degradable-store',
    ),
  ],
  // The contract as run against the in-process store (its Redis half covers none of it), the URL
  // lists and the fence reset: the suites that also drive it through a manager, a poller or a
  // real redis-server (store-differential, shared-races, adapter-manager, poller, unseen-busy)
  // cost 10-19 s a mutant on 2 shared cores, hours for this file.
  [
    'src/fleet/memory-store.ts',
    core('fleet-store', 'store-url-lists', 'fence-reset', 'mutation-memory-store', 'replayed-load-end'),
  ],
  [
    'src/router/placement.ts',
    core('placement-recheck', 'record-changes', 'unload-window', 'request-round-trips', 'mutation-placement'),
  ],
  ['src/adapters/claims.ts', core('shared-races', 'placement-recheck', 'mutation-claims')],
  // The manager's helpers: the suites that drive a manager (each about 1-4 s on 2 shared cores).
  [
    'src/adapters/unknown-names.ts',
    core('adapter-manager', 'shared-races', 'access-deadline', 'mutation-manager', 'mutation-unknown-names'),
  ],
  [
    'src/adapters/backoff.ts',
    // Without shared-races: bound by the wall clock, it failed Stryker's initial run at load average 7.
    core('adapter-manager', 'access-deadline', 'mutation-manager', 'mutation-backoff', 'load-backoff-filter'),
  ],
  // The scheduling filter that routes past a load backing off (stop 66), with its unit and in-process suites.
  ['src/scheduler/filters/load-backoff.ts', core('load-backoff-filter', 'integration/load-backoff')],
  [
    'src/adapters/load-failures.ts',
    core('adapter-manager', 'shared-races', 'access-deadline', 'mutation-manager', 'mutation-load-failures'),
  ],
  ['src/adapters/unseen-busy.ts', core('unseen-busy')],
  // Its users' fast suites: the room's and the idle unload's (placement's suites take 30-50 s a run).
  ['src/adapters/eviction.ts', core('adapter-manager', 'mutation-manager', 'mutation-eviction')],
  // The failover's helpers: its unit suite (the real-server suites, failover-store,
  // failover-recovery, runtime-handover, take 40-80 s a run and fail under load).
  ['src/fleet/redis/seen-down.ts', core('mutation-failover-store', 'mutation-seen-down')],
  [
    'src/fleet/redis/ended-locks.ts',
    core(
      'mutation-failover-store',
      'mutation-ended-locks',
      'failover-review',
      'failover-review-57',
      'failover-leftovers',
      // A fence handed out again while the replay is on its way (review 58).
      'failover-review-58',
      'replayed-load-end',
    ),
  ],
  // Its guards, shared-faults (item 7) and empty-restart, need a real redis-server: 45-115 s a run.
  ['src/fleet/redis/live-nodes.ts', core('mutation-live-nodes')],
  ['src/router/guessed-lease.ts', core('lease-through-load', 'mutation-guessed-lease', 'guessed-giveback')],
  // Its routing guards (placement, record-changes: 44-85 s a run) are left out for time.
  ['src/router/admission.ts', core('lease-through-load', 'mutation-admission')],
  ['src/fleet/replica-record.ts', core('memory-leases', 'mutation-memory-store', 'mutation-replica-record')],
  [
    'src/fleet/residency-table.ts',
    core('residency-table', 'mutation-memory-store', 'mutation-residency-table'),
  ],
  ['src/fleet/holder-index.ts', core('residency-table', 'mutation-memory-store', 'mutation-holder-index')],
  // mutation-adapters
  // The unload guards: the replica's word and the idle unload, through the suites that drive them
  // directly or through a manager (each 1-4 s a run on 2 shared cores).
  [
    'src/adapters/replica-word.ts',
    core(
      'replica-word',
      'replica-clock',
      'unseen-busy',
      'adapter-manager',
      'mutation-manager',
      'mutation-replica-word',
    ),
  ],
  [
    'src/adapters/idle-unload.ts',
    core('adapter-manager', 'shared-races', 'replica-word', 'mutation-manager', 'mutation-idle-unload'),
  ],
  // This node's own unloads (dst seeds 741908, 1038807, 1534246): its unit suite, the two runtimes
  // over a real redis-server (about 14 s a run), the unpolled end's asked poll through a runtime
  // (unpolled-unload) and review 62's heirs through a manager. snapshot-restart (23 s) is left out for time.
  ['src/adapters/own-unloads.ts', core('own-unloads', 'own-unload', 'unpolled-unload', 'review-62')],
  ['src/adapters/room-wants.ts', core('prefetch', 'mutation-room-wants')],
  [
    'src/adapters/policy.ts',
    core(
      'adapter-manager',
      'access-deadline',
      'mutation-manager',
      'room-wait',
      'mutation-room-wait',
      'mutation-policy',
    ),
  ],
  [
    'src/adapters/catalog.ts',
    core('catalog', 'mutation-admission', 'mutation-placement', 'mutation-catalog'),
  ],
  ['src/adapters/stats.ts', core('placement', 'mutation-stats')],
  // mutation-fleet
  // The Redis link's options, its reconnect, the server looked at (a restart, a failover: fence-reset,
  // lease-leaks on a real redis-server); sentinel-connection (a Sentinel set, about 40 s a run) is left out.
  ['src/fleet/redis/connection.ts', core('config', 'fence-reset', 'lease-leaks', 'mutation-connection')],
  // The rounds, `listed` and the stale polls (poller-specs), and `refreshUrl` asked by a runtime for an
  // unpolled unload end (unpolled-unload): each 2-7 s a run.
  ['src/fleet/poller.ts', core('poller', 'poller-specs', 'mutation-poller', 'unpolled-unload')],
  // Replicas that leave (stop 65): the node's claim, and the in-process twin of the `retain` script
  // (forget-replicas runs each case on a real redis-server too; store-differential holds the twins equal;
  // replica-claims pins its bounds to the millisecond and the batch's order, in process).
  ['src/fleet/node-claim.ts', core('node-claim', 'departed-replicas')],
  ['src/fleet/replica-claims.ts', core('forget-replicas', 'store-differential', 'replica-claims')],
  // The store's TypeScript (its Lua is one string literal to Stryker), against a real redis-server.
  // Without fleet-store: bound by the wall clock (200 ms connects), it failed Stryker's initial run
  // twice at load average 15.
  [
    'src/fleet/redis/redis-store.ts',
    // lua-scripts: a load ended static kept static (finishLoad's end mapped to the script's argument).
    core('fence-reset', 'lease-leaks', 'mutation-redis-store', 'replayed-load-end', 'lua-scripts'),
  ],
  ['src/fleet/redis/replies.ts', core('fence-reset', 'lease-leaks', 'mutation-replies')],
  // Unchanged since its rows in docs/reliability/mutation-testing.md (bd35b7f): those suites.
  [
    'src/fleet/memory-leases.ts',
    core('fleet-store', 'shared-races', 'lease-ownership', 'adapter-manager', 'memory-leases'),
  ],
  ['src/fleet/saturation.ts', core('scheduler', 'slo-classes', 'runtime-settings', 'mutation-saturation')],
  ['src/fleet/redis/outage-budget.ts', core('outage-budget', 'mutation-failover-store')],
  // nextFence (store.ts and shared-store.ts hold types only: no mutant).
  ['src/fleet/types.ts', core('mutation-memory-store', 'mutation-saturation')],
  // mutation-router
  // router.ts: its own suite and the routing suites under 1 s a run. With the others that route
  // whole requests through it (down-after-load, placement-recheck, integration/lifecycle and
  // replica-modes: 1-5 s a run) it cost 20-30 s a mutant at load average 9-16, 72 of 185 mutants
  // in 36 minutes; unload-window (10 s a run) and record-changes (7 s) were left out before that.
  [
    'src/router/router.ts',
    core(
      'log-phase-upstream',
      'request-round-trips',
      'retired-runtime',
      'runtime-settings',
      'integration/predicted-work',
      'mutation-router',
    ),
  ],
  // review-64b/64c: the unseen hold's excuse (which answers it is told of, dated when). kong-marking:
  // Kong's own 502/504 marking over an older poll, on a real redis-server too (about 10 s a run).
  [
    'src/router/log-phase.ts',
    core(
      'log-phase',
      'log-phase-upstream',
      'integration/lifecycle',
      'review-64b',
      'review-64c',
      'kong-marking',
    ),
  ],
  ['src/router/request.ts', core('request', 'mutation-request')],
  ['src/router/slo-class.ts', core('slo-classes', 'mutation-room-wait', 'mutation-slo-class')],
  // The router's steps: each one's own suite (the routing suites above, which reach them all,
  // cost 15-30 s a mutant together on 2 loaded cores: an hour and more a file). outcome.ts holds
  // types only (no mutant).
  ['src/router/registration.ts', core('mutation-placement', 'mutation-registration')],
  ['src/router/prediction.ts', core('integration/predicted-work', 'runtime-settings', 'mutation-prediction')],
  ['src/router/polled-health.ts', core('mutation-placement', 'mutation-polled-health')],
  ['src/router/stale-refresh.ts', core('mutation-stale-refresh')],
  ['src/router/direct-answers.ts', core('request', 'mutation-direct-answers')],
  ['src/router/model-list.ts', core('mutation-model-list')],
  ['src/router/refusal-log.ts', core('mutation-refusal-log')],
  ['src/router/proxied-request.ts', core('mutation-proxied-request')],
  ['src/router/body-member.ts', core('mutation-proxied-request')],
];

function summary(file, json) {
  const mutants = JSON.parse(readFileSync(json, 'utf8')).files[file]?.mutants ?? [];
  const n = (s) => mutants.filter((m) => m.status === s).length;
  const valid = mutants.length - n('Ignored') - n('CompileError') - n('RuntimeError');
  const killed = n('Killed') + n('Timeout');
  const score = valid ? ((100 * killed) / valid).toFixed(1) : '-';
  return {
    mutants: valid,
    killed,
    timeout: n('Timeout'),
    survived: n('Survived'),
    noCoverage: n('NoCoverage'),
    score,
  };
}

// `part:L1-L2,L3-L4` narrows a file to those lines (Stryker's `--mutate file:L1-L2`): a run that
// would not finish in the time there is covers the safety logic only.
const wanted = process.argv.slice(2).map((a) => {
  const m = /^(.*):(\d+-\d+(?:,\d+-\d+)*)$/.exec(a);
  return m ? { part: m[1], ranges: m[2].split(',') } : { part: a, ranges: [] };
});
const chosen = TARGETS.filter(([f]) => wanted.length === 0 || wanted.some((w) => f.includes(w.part))).map(
  ([f, suites]) => {
    const ranges = wanted.find((w) => f.includes(w.part))?.ranges ?? [];
    return [f, suites, ranges];
  },
);
if (chosen.length === 0) {
  console.error(
    `no safety file matches ${process.argv.slice(2).join(' ')}; known: ${TARGETS.map(([f]) => f).join(' ')}`,
  );
  process.exit(2);
}
mkdirSync(reports, { recursive: true });
let failed = 0;
for (const [file, suites, ranges] of chosen) {
  const mutate = ranges.length ? ranges.map((r) => `${file}:${r}`).join(',') : file;
  const slug = basename(file, '.ts');
  const started = Date.now();
  const run = spawnSync(
    'npx',
    [
      'stryker',
      'run',
      '--mutate',
      mutate,
      '--concurrency',
      // MUTATION_CONCURRENCY=2: two runners, for a file whose run would not end in the time there is.
      process.env.MUTATION_CONCURRENCY ?? '1',
      '--incrementalFile',
      `reports/mutation/${slug}.incremental.json`,
    ],
    { cwd: root, stdio: 'inherit', env: { ...process.env, MUTATION_SUITES: suites.join(',') } },
  );
  const seconds = Math.round((Date.now() - started) / 1000);
  const json = join(reports, 'mutation.json');
  if (run.status !== 0 || !existsSync(json)) {
    console.error(`${file}: stryker exited ${run.status} after ${seconds} s`);
    failed++;
    continue;
  }
  copyFileSync(json, join(reports, `${slug}.json`));
  const s = summary(file, json);
  console.log(
    `| \`${slug}.ts\`${ranges.length ? ` (lines ${ranges.join(', ')})` : ''} | ${s.mutants} | ${s.killed} (${s.timeout}) | ${s.survived} | ${s.noCoverage} | ${s.score}% | ${seconds} s |`,
  );
}
process.exit(failed ? 1 : 0);
