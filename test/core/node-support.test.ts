/**
 * The Node versions the project builds and tests on are ones Node still supports: the Docker
 * image's base, the versions CI installs (.ci/run) and the floor of package.json's `engines`.
 * This test fails on the day one of them reaches its end of life, on purpose.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..');
const read = (p: string) => readFileSync(join(ROOT, p), 'utf8');

/** End of life of each Node LTS line: nodejs/Release schedule.json (e4bf922d83b8). */
const END_OF_LIFE: Record<number, string> = {
  20: '2026-04-30',
  22: '2027-04-30',
  24: '2028-04-30',
  26: '2029-04-30',
};

const supportedToday = (major: number) => {
  const end = END_OF_LIFE[major];
  if (end === undefined)
    throw new Error(`Node ${major}: not an LTS line this test knows; add its end of life`);
  return `Node ${major} ${Date.now() < Date.parse(`${end}T23:59:59Z`) ? 'supported' : `ended ${end}`}`;
};

it('builds the Docker image on a supported Node', () => {
  const bases = [...read('docker/Dockerfile').matchAll(/^FROM node:(\d+)-/gm)].map((m) => Number(m[1]));
  expect(bases.length).toBeGreaterThan(0);
  for (const major of bases) expect(supportedToday(major)).toBe(`Node ${major} supported`);
});

it('runs CI on supported Nodes, 24 and 22 among them', () => {
  const line = read('.ci/run').match(/^NODE_VERSIONS=\(([\d ]+)\)$/m);
  expect(line).not.toBeNull();
  const versions = line![1]!.trim().split(/\s+/).map(Number);
  expect(versions).toEqual(expect.arrayContaining([24, 22]));
  for (const major of versions) expect(supportedToday(major)).toBe(`Node ${major} supported`);
});

it("declares in engines a floor that is a supported Node, CI's oldest", () => {
  const engines = JSON.parse(read('package.json')).engines.node as string;
  const floor = Number(engines.match(/^>=(\d+)/)![1]);
  expect(supportedToday(floor)).toBe(`Node ${floor} supported`);
  const ci = read('.ci/run')
    .match(/^NODE_VERSIONS=\(([\d ]+)\)$/m)![1]!
    .trim()
    .split(/\s+/)
    .map(Number);
  expect(floor).toBe(Math.min(...ci));
});
