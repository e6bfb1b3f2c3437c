/**
 * Passive health hears only the replica's answers, through the real plugin server: a plugin after
 * lora-router that ends requests with its own 503 (request-termination while a service is in
 * maintenance: priority 2, below lora-router's 900) never takes a healthy replica out. Kong's
 * `kong.response.get_source()` says 'exit' for it (Kong/kong 3.9.3 kong/pdk/response.lua).
 * The replica's own 5xx in a row still do: plugins.test.ts.
 */
import type { KongDriver } from '../../harness/kong/driver';
import { onDemand, startWorld, usePluginServer, vllm } from './world';

let driver: KongDriver;
usePluginServer((_s, d) => {
  driver = d;
});

let w: Awaited<ReturnType<typeof startWorld>> | undefined;
afterEach(async () => {
  await w?.stop();
  w = undefined;
});

const MAINTENANCE = Buffer.from('{"message":"Service in maintenance"}');

it("a later plugin's 503s in a row leave the replica up, and the next request is served there", async () => {
  let maintenance = false;
  w = await startWorld(
    driver,
    [vllm()],
    (u) => onDemand(u, { stale_after_ms: 3_600_000 }),
    { after: () => (maintenance ? { status: 503, body: MAINTENANCE, headers: {} } : undefined) },
    600_000,
  );
  expect((await w.chat('a')).status).toBe(200);
  // A poll landing among the 503s below would mark the replica up again and hide a count.
  const polls = await w.pollsHoldingStill();
  maintenance = true;
  const statuses: number[] = [];
  for (let i = 0; i < 4; i++) statuses.push((await w.chat('a')).status);
  expect(statuses).toEqual([503, 503, 503, 503]);
  maintenance = false;
  const s = await w.statusJson();
  expect(s.replicas.map((r: { health: string }) => r.health)).toEqual(['up']);
  expect(s.poller.polls).toBe(polls); // no poll told it
  expect((await w.chat('a')).status).toBe(200);
  expect(w.fleet.replicas[0]!.adapterLog().filter((e) => e.op === 'load')).toHaveLength(1);
});
