/**
 * Preloaded (`node --require`) into a plugin server by bench/plugin-server-profile.ts: a CPU
 * profile of the measured requests only. SIGUSR2 starts V8's sampling profiler (after the
 * warm-up, so start-up and compilation of the first requests stay out); SIGTERM, which
 * `PluginServerProcess.stop` sends, writes it to `$PROFILE_OUT/p.cpuprofile` and exits.
 * `--cpu-prof` would cover the whole life and write nothing on SIGTERM.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { join } from 'node:path';

const out = process.env.PROFILE_OUT;
let session: Session | undefined;

process.on('SIGUSR2', () => {
  session = new Session();
  session.connect();
  const s = session;
  s.post('Profiler.enable', () =>
    s.post('Profiler.setSamplingInterval', { interval: Number(process.env.PROFILE_INTERVAL_US ?? 100) }, () =>
      s.post('Profiler.start'),
    ),
  );
});

process.on('SIGTERM', () => {
  if (!session || !out) return process.exit(0);
  session.post('Profiler.stop', (err, r) => {
    if (!err) {
      mkdirSync(out, { recursive: true });
      writeFileSync(join(out, 'p.cpuprofile'), JSON.stringify(r.profile));
    }
    process.exit(0);
  });
});
