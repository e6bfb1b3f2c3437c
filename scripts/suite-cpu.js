// A jest reporter: per suite, its wall time, the CPU of the jest process, and the CPU the whole
// machine used meanwhile (its children: plugin servers, replicas, redis-server; and anything else
// running), as a share of one core. jest.config.js WAITING came from it, on an otherwise idle
// machine: `npx jest --reporters default --reporters ./scripts/suite-cpu.js`, then read
// suite-cpu.json (SUITE_CPU_OUT to put it elsewhere).
'use strict';
const fs = require('node:fs');
const os = require('node:os');

/** The machine's busy and total CPU time so far (/proc/stat, Linux; zeros elsewhere). */
function machine() {
  try {
    const t = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const total = t.reduce((a, b) => a + b, 0);
    return { busy: total - t[3] - t[4], total };
  } catch {
    return { busy: 0, total: 0 };
  }
}

class SuiteCpu {
  constructor() {
    this.started = new Map();
    this.rows = [];
    this.out = process.env.SUITE_CPU_OUT ?? 'suite-cpu.json';
  }
  onTestFileStart(test) {
    this.started.set(test.path, { at: Date.now(), cpu: process.cpuUsage(), machine: machine() });
  }
  onTestFileResult(test) {
    const s = this.started.get(test.path);
    if (!s) return;
    this.started.delete(test.path);
    const wallMs = Date.now() - s.at;
    const cpu = process.cpuUsage(s.cpu);
    const m = machine();
    const share = m.total > s.machine.total ? (m.busy - s.machine.busy) / (m.total - s.machine.total) : 0;
    this.rows.push({
      suite: test.path.slice(test.path.indexOf('/test/') + 1),
      wallMs,
      // Of one core over the suite's run.
      jestCores: +((cpu.user + cpu.system) / 1000 / wallMs).toFixed(2),
      machineCores: +(share * os.availableParallelism()).toFixed(2),
    });
  }
  onRunComplete() {
    this.rows.sort((a, b) => a.machineCores - b.machineCores);
    fs.writeFileSync(this.out, JSON.stringify(this.rows, null, 1) + '\n');
  }
}
module.exports = SuiteCpu;
