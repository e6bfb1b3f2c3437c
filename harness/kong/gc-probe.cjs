// Preload for the plugin server (test/kong/young-promotion.test.ts): the first SIGUSR2 starts
// counting what the young generation's collections move into the old one, the second prints it
// (`gc-probe <bytes promoted> <scavenges>`): counted, so the same on a busy machine.
const { GCProfiler } = require('node:v8');

let profiler;
process.on('SIGUSR2', () => {
  if (!profiler) {
    profiler = new GCProfiler();
    profiler.start();
    return;
  }
  let promoted = 0;
  let scavenges = 0;
  for (const s of profiler.stop().statistics) {
    if (s.gcType !== 'Scavenge') continue;
    scavenges++;
    const old = (h) => h.heapSpaceStatistics.find((x) => x.spaceName === 'old_space').spaceUsedSize;
    promoted += old(s.afterGC) - old(s.beforeGC);
  }
  profiler = undefined;
  process.stderr.write(`gc-probe ${promoted} ${scavenges}\n`);
});
