/**
 * A reload under a request, through the real plugin server: the request that began on the old
 * configuration logs with it (its `__seq__`) after the worker started the new one, so Kong starts an
 * old-config instance for that log phase (harness/kong/workers.ts `instanceId`, plugin.lua 3.9.3
 * `get_instance_id`). That registration is of an older configuration: it must not supersede the
 * newer one. Left idle past the lapse grace (60 s at least, node-claim.ts MIN_LAPSE_MS), the node
 * still routes to the new configuration's replica (status lists it) and no longer to the old one.
 */
import type { KongDriver } from '../../harness/kong/driver';
import { SimFleet } from '../../sim/fleet';
import { onDemand, startWorld, usePluginServer, vllm } from './world';

let driver: KongDriver;
usePluginServer((_s, d) => (driver = d));

const POLL_MS = 100;
/** The lapse grace (MIN_LAPSE_MS) and rounds for the departure to go. */
const SETTLE_MS = 60_000 + 30 * POLL_MS;

it(
  "an old-config log phase after a reload does not take the node's claim back to the old replicas",
  async () => {
    const config = (urls: string[]) => onDemand(urls, { lease_max_age_ms: 1000 });
    // The old replica decodes slowly: its request is still under way after the reload.
    const w = await startWorld(driver, [vllm({ timeScale: 1 })], config, { workers: 1 }, POLL_MS);
    const next = await SimFleet.start([vllm()]);
    try {
      const oldUrl = w.fleet.urls[0]!;
      const newUrl = next.urls[0]!;
      expect((await w.chat('a')).status).toBe(200);
      let slowDone = false;
      const slow = w.chat('a', 400).then((r) => ((slowDone = true), r));
      await new Promise((r) => setTimeout(r, 200));
      await w.service.configure([{ name: 'lora-router', config: config(next.urls) }]);
      // The worker's next request starts the new configuration's instance.
      const q = await w.chat('a');
      expect(q.kong.target?.port).toBe(Number(new URL(newUrl).port));
      expect(slowDone).toBe(false);
      // Its log phase, with the old configuration, starts an old-config instance.
      expect((await slow).status).toBe(200);
      // Idle past the grace: the new configuration is the plugin's, the old one lapsed.
      await new Promise((r) => setTimeout(r, SETTLE_MS));
      const listed = ((await w.statusJson()).replicas as { url: string }[]).map((r) => r.url);
      expect({ statusLists: listed, oldUrl }).toEqual({ statusLists: [newUrl], oldUrl });
    } finally {
      await w.stop();
      await next.stop();
    }
  },
  SETTLE_MS + 60_000,
);
