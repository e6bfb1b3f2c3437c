/**
 * A fleet whose addresses change, through the real plugin server: each change is a new
 * lora-router configuration of the same plugin (Kong keeps its `__plugin_id`, a new `__seq__`),
 * whose instance the worker starts on its next request before closing the old one
 * (harness/kong/workers.ts). Without Redis, once the superseded configuration has been unused for
 * the grace (`lease_max_age_ms` at its least, 1 s: the grace is then MIN_LAPSE_MS, 60 s), the
 * departed replicas get no more polls (counted by the simulated replicas themselves) and the
 * status route no longer lists them. The probe of the memory audit (stop 64: 40 changes, 1,690
 * polls to departed replicas) is this run's count.
 */
import type { ServerResponse } from 'node:http';
import { SimFleet } from '../../sim/fleet';
import type { KongDriver } from '../../harness/kong/driver';
import { onDemand, startWorld, usePluginServer, vllm } from './world';

let driver: KongDriver;
usePluginServer((_s, d) => (driver = d));

const CHANGES = 40;
const POLL_MS = 100;
/** The lapse grace (node-claim.ts MIN_LAPSE_MS) and rounds for the departures to go. */
const SETTLE_MS = 60_000 + 30 * POLL_MS;

/** Counts each `/metrics` request a simulated replica answers, with when it came. */
function countPolls(fleet: SimFleet, into: { url: string; at: number }[]): void {
  for (const r of fleet.replicas) {
    const replica = r as unknown as { metrics(res: ServerResponse): void };
    const metrics = replica.metrics.bind(replica);
    replica.metrics = (res) => {
      into.push({ url: r.url, at: Date.now() });
      metrics(res);
    };
  }
}

it(
  `${CHANGES} address changes of one plugin: the departed replicas get no polls past the grace and leave the status route`,
  async () => {
    const polls: { url: string; at: number }[] = [];
    const config = (urls: string[]) => onDemand(urls, { lease_max_age_ms: 1000 });
    const w = await startWorld(driver, [vllm()], config, { workers: 1 }, POLL_MS);
    const fleets: SimFleet[] = [];
    try {
      countPolls(w.fleet, polls);
      const departedAt = new Map<string, number>();
      let current = w.fleet.urls[0]!;
      expect((await w.chat('a')).status).toBe(200);
      for (let i = 0; i < CHANGES; i++) {
        const next = await SimFleet.start([vllm()]);
        fleets.push(next);
        countPolls(next, polls);
        await w.service.configure([{ name: 'lora-router', config: config(next.urls) }]);
        // The worker's next request starts the new instance and closes the old one.
        const r = await w.chat('a');
        expect(r.status).toBe(200);
        expect(r.kong.target?.port).toBe(Number(new URL(next.urls[0]!).port));
        departedAt.set(current, Date.now());
        current = next.urls[0]!;
      }
      const changed = Date.now();
      // Bounded: the grace, then the rounds that drop them.
      await new Promise((r) => setTimeout(r, SETTLE_MS));
      const from = Date.now();
      await new Promise((r) => setTimeout(r, 20 * POLL_MS));
      const to = Date.now();
      const departed = (p: { url: string }) => departedAt.has(p.url);
      const listed = ((await w.statusJson()).replicas as { url: string }[]).map((r) => r.url);
      // The memory audit's probe over this bounded run: every poll of a replica after it departed,
      // and those once each was past the grace and the settling rounds.
      const after = polls.filter((p) => departed(p) && p.at >= from && p.at <= to).length;
      const all = polls.filter((p) => departed(p) && p.at > departedAt.get(p.url)!).length;
      process.stderr.write(
        `departed-replicas probe: ${CHANGES} changes; polls to departed replicas: ${all} over the run ` +
          `(${Math.round((to - changed) / 1000)} s from the last change), ${after} in the last ${to - from} ms; ` +
          `status lists ${listed.length}\n`,
      );
      expect({ departedPollsAfter: after, statusLists: listed }).toEqual({
        departedPollsAfter: 0,
        statusLists: [current],
      });
      // The current replica is still polled.
      expect(polls.filter((p) => p.url === current && p.at >= from).length).toBeGreaterThan(0);
    } finally {
      await w.stop();
      await Promise.all(fleets.map((f) => f.stop()));
    }
  },
  SETTLE_MS + 60_000,
);
