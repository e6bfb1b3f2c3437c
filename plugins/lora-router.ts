/**
 * Kong plugin `lora-router` (access + log). Thin glue: PDK calls in, the routing core's
 * decision out. With the adapter resident: 4 PDK calls in access, 2 in log.
 */
import type Kong from 'kong-pdk/kong';
import { exportSchema } from '../src/config/kong-schema';
import { parseRouterConfig } from '../src/config/parse';
import { routerSchema } from '../src/config/router-schema';
import { errors, type RouterError } from '../src/errors';
import { routerConfigWarnings } from '../src/config/warnings';
import { onceEach, operatorLog, stderrLogger, warnDeprecated, writeNotices } from '../src/log';
import { logPhase, type DecisionRecord } from '../src/router/log-phase';
import { RouterService } from '../src/router/router';
import { OBJECTIVE_HEADER, TTFT_HEADER, type SloHints } from '../src/router/slo-class';
import { LeaseNotOpen } from '../src/lease';
import { sharedRuntime } from '../src/runtime-registry';
import { packageVersion } from '../src/version';

/** Once per process and message: Kong starts an instance of one config on every worker. */
const warnConfig = onceEach((msg) => operatorLog.warn(msg));

/** What `kong.client.get_consumer()` gives (a consumer entity), as far as the router reads it. */
type Consumer = { id?: string | null; username?: string | null };

/** Key in `kong.ctx.shared` for the decision: the log phase reads it, other plugins may. */
const CTX_KEY = 'lora_router';

class LoraRouterPlugin {
  private readonly service: RouterService | null = null;
  private readonly configError: RouterError | null = null;
  /** `consumer_slo_class` names any consumer: classes then read the consumer (decided once, not per request). */
  private readonly perConsumer: boolean = false;

  constructor(config: unknown) {
    try {
      const c = parseRouterConfig(config, warnDeprecated);
      for (const w of routerConfigWarnings(c)) warnConfig(w);
      // Kong's plugin id: a changed configuration of this plugin supersedes the last (its replicas lapse).
      // Its `__seq__` tells an old-config instance (a log phase begun before a reload) from a newer
      // one: node-wide and growing (plugins_iterator.lua `get_plugin_config`: the `kong` shared
      // dict's incr), 0 when that incr failed (then unknown).
      const kong = config as { __plugin_id?: unknown; __seq__?: unknown } | null;
      const pluginId = typeof kong?.__plugin_id === 'string' ? kong.__plugin_id : undefined;
      const seq = typeof kong?.__seq__ === 'number' && kong.__seq__ > 0 ? kong.__seq__ : undefined;
      // By plugin and `seq` too: an old-config instance runs where its plugin's newest one decides.
      this.service = new RouterService(c, sharedRuntime(c.redis, seq, pluginId), pluginId, seq);
      this.perConsumer = Object.keys(c.consumer_slo_class).length > 0;
    } catch (err) {
      // Kong validated the schema; what is left (a bad regex...) is answered on each request.
      this.configError = errors.misconfigured((err as Error).message);
      stderrLogger.error(this.configError.message);
    }
  }

  async access(kong: Kong): Promise<void> {
    if (!this.service) {
      const e = this.configError!;
      await writeNotices(kong.log, [{ level: 'err', msg: e.message }]);
      return void (await kong.response.exit(e.status, Buffer.from(JSON.stringify(e.body())), e.headers()));
    }
    // Each PDK name read builds a proxy (kong-pdk 0.6.0 pdk.js `bridgeHandler.get`: a regex
    // replace, a closure and a Proxy): `kong.request` once for both of its calls.
    const request = kong.request;
    const path = await request.getPath();
    // With a max, Kong (>= 3.8.0) reads a body nginx spooled to a file past client_body_buffer_size;
    // without one it returns nil, which Kong cannot pack (a Lua error, 500). Kong/kong 3.9.3
    // kong/pdk/request.lua `get_raw_body`; mp_rpc.lua `fix_raw`.
    const getRawBody = request.getRawBody as unknown as (max: number) => Promise<Uint8Array | string | null>;
    const body = await getRawBody(this.service.config.max_body_bytes);
    // The consumer (an authentication plugin's) is read only if the request would start a load,
    // or a class is configured per consumer; once, whoever asks.
    let once: Promise<Consumer | null> | undefined;
    const consumerOf = () => (once ??= kong.client.getConsumer() as Promise<Consumer | null>);
    const consumer = async () => (await consumerOf())?.id ?? undefined;
    const perConsumer = this.perConsumer;
    // `slo_classes`: the objective headers in one PDK call (plus the consumer when classes are per consumer).
    const slo = async (): Promise<SloHints> => {
      const h = (await request.getHeaders()) as Record<string, string | string[] | undefined>;
      const first = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);
      const c = perConsumer ? await consumerOf() : null;
      return {
        objective: first(h[OBJECTIVE_HEADER]),
        ttftMs: first(h[TTFT_HEADER]),
        consumer: c ? { id: c.id ?? undefined, username: c.username ?? undefined } : undefined,
      };
    };
    const r = await this.service.route({ path, body, consumer, slo, method: () => request.getMethod() });
    if (r.kind === 'respond') {
      // Refusals are the cold path: rare operational notices may ride on them.
      await writeNotices(kong.log);
      // exit ends the exchange: nothing may follow it.
      return void (await kong.response.exit(r.status, Buffer.from(JSON.stringify(r.body)), r.headers));
    }
    const record: DecisionRecord = { lease: r.leaseId, replica: r.url, stage: r.stage, adapter: r.adapter };
    try {
      // First, so that from here on the log phase can always give the lease back.
      await kong.ctx.shared.set(CTX_KEY, record as never);
    } catch (err) {
      // Not sent there by this decision (Kong logs the error and proxies to the Service's own
      // upstream): nothing is told of it to the unseen hold, the safe side.
      await this.service.finish(r.leaseId, undefined, false);
      throw err;
    }
    await kong.service.setTarget(r.host, r.port);
    // set_target sets host and port only; the scheme is the Service's (http in kong.yml).
    if (r.https) await kong.service.request.setScheme('https');
    // A load happened (never the resident path): rare operational notices may ride on it.
    if ((r.stage === 'free' || r.stage === 'any') && operatorLog.size > 0) await writeNotices(kong.log);
    if (r.body !== undefined) await kong.service.request.setRawBody(r.body);
    if (this.service.config.decision_headers) {
      await kong.response.setHeader('X-Lora-Replica', r.url);
      await kong.response.setHeader('X-Lora-Stage', r.stage);
    }
  }

  async log(kong: Kong): Promise<void> {
    // Runs for every request, also those an earlier plugin refused: only ours carry a record.
    const record = (await kong.ctx.shared.get(CTX_KEY)) as DecisionRecord | null | undefined;
    if (!record || typeof record.lease !== 'string') return;
    const status = (await kong.response.getStatus()) as number | undefined;
    try {
      // A promise only where something is waited for (a round trip to Kong or to a shared store).
      const released = logPhase(this.service?.runtime ?? null, record, status, () =>
        kong.response.getSource(),
      );
      if (released) await released;
    } catch (err) {
      // Given back already (a second log phase for one request, a bug) or reclaimed by age:
      // nothing is released twice, and the operator hears of it.
      if (!(err instanceof LeaseNotOpen)) throw err;
      await kong.log.err(`lora-router: ${err.message}`);
    }
  }
}

export const Plugin = LoraRouterPlugin;
export const Schema = exportSchema(routerSchema);
export const Version = packageVersion();
/** After authentication (key-auth 1250) and rate limiting (910); before ai-proxy (770). */
export const Priority = 900;
