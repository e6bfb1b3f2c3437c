/**
 * Kong plugin `lora-poller`. Configures and starts this process's poller (a module-level,
 * unref'd timer shared with lora-router), and answers its own paths under `base_path`: the
 * placement page, `/status` (JSON), `/metrics` (Prometheus text). Other paths pass through.
 */
import type Kong from 'kong-pdk/kong';
import { exportSchema } from '../src/config/kong-schema';
import { parsePollerConfig } from '../src/config/parse';
import { errors } from '../src/errors';
import { pollerSchema, type PollerConfig } from '../src/config/poller-schema';
import { operatorLog, warnDeprecated, writeNotices } from '../src/log';
import { packageVersion } from '../src/version';
import type { FleetRuntime } from '../src/runtime';
import { sharedRuntime } from '../src/runtime-registry';
import { placementPage } from '../src/status/page';
import { fleetStatus } from '../src/status/status';

/** Deprecated config names in use, told once per process (Kong's data plane does not warn). */

class LoraPollerPlugin {
  private readonly config: PollerConfig;
  private readonly rt: FleetRuntime;
  /** `base_path` without trailing slashes, once: the poller sees every request of its service. */
  private readonly base: string;

  constructor(raw: unknown) {
    this.config = parsePollerConfig(raw, warnDeprecated);
    this.base = this.config.base_path.replace(/\/+$/, '');
    const kong = raw as { __plugin_id?: unknown; __seq__?: unknown } | null;
    // Kong's plugin id: a reload of this plugin replaces its settings, another plugin adds its own.
    const pluginId = typeof kong?.__plugin_id === 'string' ? kong.__plugin_id : undefined;
    // Kong's `__seq__` (lora-router.ts): an old-config instance runs where its plugin's newest one does.
    const seq = typeof kong?.__seq__ === 'number' && kong.__seq__ > 0 ? kong.__seq__ : undefined;
    const rt = (this.rt = sharedRuntime(this.config.redis, seq, pluginId));
    rt.registerPolling(pluginId ?? JSON.stringify(raw), {
      intervalMs: this.config.poll_interval_ms,
      timeoutMs: this.config.timeout_ms,
      unhealthyTimeouts: this.config.unhealthy_timeouts,
      jitter: this.config.jitter,
    });
    rt.poller.start();
  }

  async access(kong: Kong): Promise<void> {
    const path = await kong.request.getPath();
    // Attached to a service or globally (the natural place for a companion timer), it sees
    // every request: anything outside its base path goes on untouched, after this one call.
    const sub = subPath(path, this.base);
    if (sub === undefined) return;
    // A changed `redis` record may have replaced the runtime this instance started with.
    const rt = this.rt.current();
    const serves = (e: PollerConfig['endpoints'][number]) => this.config.endpoints.includes(e);
    let status = 200;
    let body: string;
    let type: string;
    if (sub === '/status' && serves('status')) {
      body = JSON.stringify(await fleetStatus(rt));
      type = 'application/json';
    } else if (sub === '/metrics' && serves('metrics')) {
      body = await rt.metrics.registry.metrics();
      type = rt.metrics.registry.contentType;
    } else if (sub === '' && serves('page')) {
      body = placementPage(this.base);
      type = 'text/html; charset=utf-8';
    } else {
      const e = errors.notFound(path);
      status = e.status;
      body = JSON.stringify(e.body());
      type = 'application/json';
    }
    if (operatorLog.size > 0) await writeNotices(kong.log);
    await kong.response.exit(status, Buffer.from(body), {
      'Content-Type': type,
      'Cache-Control': 'no-store',
    });
  }
}

/** The path below `base` (no trailing slash; '' for the base itself), or undefined outside it. */
function subPath(path: string, base: string): string | undefined {
  if (path !== base && !path.startsWith(`${base}/`)) return undefined;
  return path.slice(base.length).replace(/\/+$/, '');
}

export const Plugin = LoraPollerPlugin;
export const Schema = exportSchema(pollerSchema);
export const Version = packageVersion();
/**
 * After authentication (key-auth 1250) and rate limiting (910), before lora-router (900): on a
 * service carrying both, its own paths are answered before lora-router would refuse them.
 */
export const Priority = 905;
