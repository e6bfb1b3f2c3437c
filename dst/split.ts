/**
 * `npm run dst -- --split --seeds N [--start S]`: where a schedule's CPU goes, in this process.
 * Each seed runs twice: as generated, then as an idle world as long (the same world, no action,
 * its span the schedule's whole simulated time). The idle run is the background a schedule pays
 * whatever it does (heartbeats, polls with their scrapes and parses, probes, pub/sub); the rest is
 * what its requests and faults cost (routing, loads, store calls, the engines, the checks of the
 * steps they add). The CLI's CPU per schedule is the first figure.
 */
import { generate, type ScheduleOptions } from './schedule';
import { runSchedule } from './run';
import { World } from './world';

export interface Split {
  schedules: number;
  /** Per schedule, CPU ms: the whole, building its world, and the idle world as long. */
  cpuMs: number;
  setupMs: number;
  idleMs: number;
  steps: number;
  idleSteps: number;
  simMs: number;
}

function cpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

export async function split(from: number, count: number, o: ScheduleOptions): Promise<Split> {
  const s: Split = { schedules: 0, cpuMs: 0, setupMs: 0, idleMs: 0, steps: 0, idleSteps: 0, simMs: 0 };
  for (let seed = from; seed < from + count; seed++) {
    const schedule = generate(seed, o);
    const began = cpuMs();
    const world = new World(schedule);
    s.setupMs += cpuMs() - began;
    const r = await world.run();
    s.cpuMs += cpuMs() - began;
    const idleBegan = cpuMs();
    const idle = await runSchedule({
      ...schedule,
      world: { ...schedule.world, spanMs: r.simMs },
      actions: [],
    });
    s.idleMs += cpuMs() - idleBegan;
    s.schedules++;
    s.steps += r.steps;
    s.idleSteps += idle.steps;
    s.simMs += r.simMs;
  }
  return s;
}

export function describeSplit(s: Split): string {
  const n = Math.max(1, s.schedules);
  const ms = (x: number) => `${(x / n).toFixed(2)} ms`;
  const steps = (x: number) => `${Math.round(x / n)} steps`;
  const us = (cpu: number, st: number) => `${((1000 * cpu) / Math.max(1, st)).toFixed(0)} µs a step`;
  return (
    `${s.schedules} schedules, ${(s.simMs / n / 1000).toFixed(2)} simulated s each: ${ms(s.cpuMs)} CPU a schedule (${steps(s.steps)})\n` +
    `  setup (world, nodes, replicas, stores): ${ms(s.setupMs)}\n` +
    `  background (an idle world as long, setup included): ${ms(s.idleMs)} (${steps(s.idleSteps)}, ${us(s.idleMs, s.idleSteps)})\n` +
    `  the requests' and faults' own: ${ms(s.cpuMs - s.idleMs)} (${steps(s.steps - s.idleSteps)}, ${us(s.cpuMs - s.idleMs, s.steps - s.idleSteps)})\n`
  );
}
