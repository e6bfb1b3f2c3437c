// Preload for a plugin server under test: each SIGUSR2 moves this process's clock forward by
// CLOCK_JUMP_MS, as a VM suspended that long would see it. Only what reads the clock moves
// (performance.now, Date.now: src/clock.ts SystemClock reads the first); timers still wait real
// time. A test of a window measured on the server's clock (the cold-load budget's minute) ends it
// without waiting it out.
const { performance } = require('node:perf_hooks');

const step = Number(process.env.CLOCK_JUMP_MS);
if (!(step > 0))
  throw new Error(`clock-jump.cjs: CLOCK_JUMP_MS must be > 0, got ${process.env.CLOCK_JUMP_MS}`);
let offset = 0;
const perfNow = performance.now.bind(performance);
const dateNow = Date.now;
performance.now = () => perfNow() + offset;
Date.now = () => dateNow() + offset;
process.on('SIGUSR2', () => {
  offset += step;
});
