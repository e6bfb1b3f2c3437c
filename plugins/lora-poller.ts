/**
 * Kong plugin `lora-poller`. Configures and starts this process's poller (a module-level,
 * unref'd timer shared with lora-router), and answers the route it is attached to:
 * `.../status` (JSON), `.../metrics` (Prometheus text), anything else the placement page.
 */
import type Kong from 'kong-pdk/kong';
import { exportSchema } from '../src/config/kong-schema';
import { parsePollerConfig } from '../src/config/parse';
import { errors } from '../src/errors';
import { pollerSchema, type PollerConfig } from '../src/config/poller-schema';
import { packageVersion } from '../src/version';
import { sharedRuntime, type FleetRuntime } from '../src/runtime';
import { placementPage } from '../src/status/page';
import { fleetStatus } from '../src/status/status';

class LoraPollerPlugin {
  private readonly config: PollerConfig;
  private readonly rt: FleetRuntime;

  constructor(raw: unknown) {
    this.config = parsePollerConfig(raw);
    const rt = (this.rt = sharedRuntime(this.config.redis));
    rt.poller.configure({
      intervalMs: this.config.poll_interval_ms,
      timeoutMs: this.config.timeout_ms,
      jitter: this.config.jitter,
    });
    rt.poller.start();
  }

  async access(kong: Kong): Promise<void> {
    const path = await kong.request.getPath();
    // A changed `redis` record may have replaced the runtime this instance started with.
    const rt = this.rt.current();
    const serves = (e: PollerConfig['endpoints'][number]) => this.config.endpoints.includes(e);
    let status = 200;
    let body: string;
    let type: string;
    if (/\/status\/?$/.test(path) && serves('status')) {
      body = JSON.stringify(await fleetStatus(rt));
      type = 'application/json';
    } else if (/\/metrics\/?$/.test(path) && serves('metrics')) {
      body = await rt.metrics.registry.metrics();
      type = rt.metrics.registry.contentType;
    } else if (serves('page')) {
      body = placementPage(path.replace(/\/+$/, ''));
      type = 'text/html; charset=utf-8';
    } else {
      const e = errors.notFound(path);
      status = e.status;
      body = JSON.stringify(e.body());
      type = 'application/json';
    }
    await kong.response.exit(status, Buffer.from(body), {
      'Content-Type': type,
      'Cache-Control': 'no-store',
    });
  }
}

export const Plugin = LoraPollerPlugin;
export const Schema = exportSchema(pollerSchema);
export const Version = packageVersion();
/** Runs after authentication like lora-router; it answers its own route and proxies nothing. */
export const Priority = 890;
