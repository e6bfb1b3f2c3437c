/**
 * Kong's side of the external plugin-server protocol, played against the real plugin server
 * over its unix socket: what Kong's `kong/runloop/plugin_servers/` does (Kong/kong 3.8.1,
 * 3.9.3 and master; master's RPC and instance code equals 3.9.3's), and nothing more. Used by
 * the plugin tests, the benchmarks and the local gateway (`npm start`). docs/kong.md lists the
 * behaviours it encodes; each is cited beside its code here and in rpc.ts, pdk.ts, process.ts
 * and workers.ts.
 */
import { validateRecord, type FieldDef, type SchemaFields } from '../../src/config/kong-schema';
import type { KongRequest } from './pdk';
import { RpcConnection } from './rpc';
import { envVault, resolveReferences } from './vault';

export { PluginServerProcess, type PluginServerOptions } from './process';
export { RpcConnection, RpcError } from './rpc';
export { KongRequest, type ExitResponse, type PdkResult, type RequestInit } from './pdk';
export { KongNode, KongWorker, type PluginEntity } from './workers';

export interface PluginInfo {
  Name: string;
  Version: string;
  Priority: number;
  Phases: string[];
  Schema: { name: string; fields: [{ config: { type: 'record'; fields: SchemaFields } }] };
}

export interface InstanceInfo {
  Name: string;
  Id: number;
  Config: Record<string, unknown>;
  StartTime: number;
}

/**
 * Kong's own keys in the config it sends to StartInstance (Kong/kong 3.9.3 and 3.8.1
 * `kong/runloop/plugins_iterator.lua` `get_plugin_config`). Lua nils are absent from the JSON
 * (cjson), so `route_id`, `service_id`, `consumer_id` and `plugin_instance_name` appear only
 * when the plugin is scoped so, or has an `instance_name`.
 */
export interface KongKeys {
  route_id?: string;
  service_id?: string;
  consumer_id?: string;
  plugin_instance_name?: string;
  __plugin_id?: string;
  __seq__?: number;
  __key__?: string;
  __ws_id?: string;
}

/**
 * The default workspace's id, as `__ws_id` carries it: `DECLARATIVE_DEFAULT_WORKSPACE_ID`
 * (kong/constants.lua, Kong 3.9.3; a literal in 3.8.1 kong/db/schema/others/declarative_config.lua),
 * DB-less Kong's default workspace unless the declarative config names one. With a database the
 * id is random (kong/db/migrations/operations/200_to_210.lua, 3.9.3).
 */
const DEFAULT_WS_ID = '0dc6f45b-8f8d-40d2-a504-473544ee190b';

/**
 * The PDK calls whose result Kong sends with a typed Step (mp_rpc.lua `get_step_method`,
 * 3.9.3); all others use `plugin.Step`.
 */
const STEP_METHOD: Record<string, string> = {
  'kong.client.get_credential': 'plugin.StepCredential',
  'kong.client.load_consumer': 'plugin.StepConsumer',
  'kong.client.get_consumer': 'plugin.StepConsumer',
  'kong.client.authenticate': 'plugin.StepCredential',
  'kong.node.get_memory_stats': 'plugin.StepMemoryStats',
  'kong.router.get_route': 'plugin.StepRoute',
  'kong.router.get_service': 'plugin.StepService',
  'kong.request.get_query': 'plugin.StepMultiMap',
  'kong.request.get_headers': 'plugin.StepMultiMap',
  'kong.response.get_headers': 'plugin.StepMultiMap',
  'kong.service.response.get_headers': 'plugin.StepMultiMap',
};

/**
 * Phases whose Lua errors the driver answers with Kong's 500 (kong/init.lua, Kong 3.9.3). access
 * and preread catch them in `execute_collecting_plugins_iterator` (a delayed 500; in preread a
 * stream connection ends with status 500, no HTTP answer). rewrite, and response (run from
 * `Kong.access`), catch nothing: nginx answers 500 through `error_page 500 /kong_error_handler`
 * (templates/nginx_kong.lua, error_handlers.lua, 3.9.3). certificate catches nothing either, but
 * there the error fails the TLS handshake (lua-nginx-module), not a 500: the driver's
 * simplification. The log phase runs in a timer: its errors are only logged.
 */
const RESPONDING_PHASES = new Set(['certificate', 'rewrite', 'access', 'response', 'preread']);

export class KongDriver {
  private idle: RpcConnection[] = [];
  private infos = new Map<string, PluginInfo>();
  // plugins_iterator.lua (3.9.3, 3.8.1) `get_plugin_config`:
  // `ngx.shared.kong:incr("plugins_iterator:__seq__", 1, 0, 0)`, so from 1.
  private seq = 0;
  /** Where `{vault://...}` references resolve (vault.ts): Kong's `env` vault by default. */
  vault: (ref: string) => string | undefined = envVault();

  constructor(readonly socketPath: string) {}

  private async connection(): Promise<RpcConnection> {
    for (;;) {
      const c = this.idle.pop();
      if (!c) return RpcConnection.connect(this.socketPath);
      if (c.usable) return c;
    }
  }

  /**
   * One RPC on a pooled connection, a fresh one when all are busy. Kong's `Rpc:call` (mp_rpc.lua,
   * Kong 3.9.3; 3.8.1 alike) does `ngx.socket.connect` (an idle connection from the worker's
   * cosocket pool, else a new one) and `setkeepalive()` after the reply; the pool holds up to
   * `lua_socket_pool_size = 256` (templates/kong_defaults.lua, 3.9.3). The driver's pool is
   * unbounded and shared by the node's workers: its own simplification.
   */
  async call(method: string, arg: unknown): Promise<unknown> {
    const c = await this.connection();
    try {
      return await c.call(method, arg);
    } finally {
      if (c.usable) this.idle.push(c);
    }
  }

  async pluginInfo(name: string): Promise<PluginInfo> {
    let info = this.infos.get(name);
    if (!info) {
      info = (await this.call('plugin.GetPluginInfo', name)) as PluginInfo;
      this.infos.set(name, info);
    }
    return info;
  }

  /** The next `__seq__`, unique across the node's workers. */
  private nextSeq(): number {
    return ++this.seq;
  }

  /**
   * The config Kong sends for one plugin: validated against the plugin's exported schema as
   * Kong does (defaults filled, errors keyed by field; throws ConfigError: kong/db/schema/init.lua
   * `handle_missing_field`, 3.9.3), unset fields as `null` (see withNulls: the driver's choice),
   * references resolved with their `$refs` (vault.ts), plus Kong's keys.
   */
  async kongConfig(
    name: string,
    config: Record<string, unknown>,
    keys: KongKeys = {},
  ): Promise<Record<string, unknown>> {
    const info = await this.pluginInfo(name);
    const fields = info.Schema.fields[0].config.fields;
    const validated = resolveReferences(
      fields,
      withNulls(fields, validateRecord(fields, config)),
      this.vault,
    );
    const seq = keys.__seq__ ?? this.nextSeq();
    const wsId = keys.__ws_id ?? DEFAULT_WS_ID;
    return {
      ...validated,
      ...keys,
      // Kong sends the plugin entity's id (plugins_iterator.lua 3.9.3); this stand-in is the driver's.
      __plugin_id: keys.__plugin_id ?? `00000000-0000-4000-8000-${String(seq).padStart(12, '0')}`,
      __seq__: seq,
      // kong/db/dao/init.lua (3.9.3) `DAO:cache_key`: "plugins:<name>:<route>:<service>:<consumer>::<ws>".
      __key__:
        keys.__key__ ??
        `plugins:${name}:${keys.route_id ?? ''}:${keys.service_id ?? ''}:${keys.consumer_id ?? ''}::${wsId}`,
      __ws_id: wsId,
    };
  }

  /** Validates `config` (see kongConfig), then starts an instance with Kong's keys. */
  async startInstance(
    name: string,
    config: Record<string, unknown>,
    keys: KongKeys = {},
  ): Promise<InstanceInfo> {
    return this.startConfigured(name, await this.kongConfig(name, config, keys));
  }

  /** `Rpc:call_start_instance` (mp_rpc.lua 3.9.3): the config as a JSON string. */
  async startConfigured(name: string, conf: Record<string, unknown>): Promise<InstanceInfo> {
    return (await this.call('plugin.StartInstance', {
      Name: name,
      Config: JSON.stringify(conf),
    })) as InstanceInfo;
  }

  async closeInstance(id: number): Promise<unknown> {
    return this.call('plugin.CloseInstance', id);
  }

  /**
   * Runs one phase of one instance for `req` as mp_rpc.lua's `bridge_loop` does (3.9.3; 3.8.1
   * alike): HandleEvent, then a Step per PDK call until "ret". Kong never sends StepError
   * (`call_pdk_method` keeps only the first return value, so `pdk_err` is always nil): a nil
   * result is a Step without Data. After `kong.response.exit` Kong sends nothing more for the
   * event (exit yields the plugin's coroutine for good: kong/pdk/response.lua 3.9.3 `exit` with
   * `ctx.delay_response`). A PDK call that raises ends the event the same way, unstepped, and
   * in access Kong answers 500 (kong/init.lua 3.9.3 `execute_collecting_plugins_iterator`).
   * The driver holds one connection for the event; Kong takes one from the pool per call.
   * RPC failures (an error reply, a dead socket, the 60 s timeout) are thrown: the caller lets
   * the request through, as `Rpc:handle_event` logs them and returns.
   */
  async handleEvent(instanceId: number, phase: string, req: KongRequest): Promise<void> {
    req.phase = phase;
    const c = await this.connection();
    let reusable = true;
    try {
      let reply = (await c.call('plugin.HandleEvent', { InstanceId: instanceId, EventName: phase })) as {
        EventId: number;
        Data: 'ret' | { Method: string; Args?: unknown[] };
      };
      for (;;) {
        if (reply.Data === 'ret') return;
        const { Method, Args } = reply.Data;
        const r = req.pdk(Method, Args ?? []);
        if (r.raise !== undefined) {
          if (RESPONDING_PHASES.has(phase)) req.raised(`${Method}: ${r.raise}`);
          else req.luaErrors.push(`${Method}: ${r.raise}`);
          return;
        }
        if (Method === 'kong.response.exit') return;
        const step = STEP_METHOD[Method] ?? 'plugin.Step';
        reply = (await c.call(
          step,
          r.value === undefined ? { EventId: reply.EventId } : { EventId: reply.EventId, Data: r.value },
        )) as typeof reply;
      }
    } catch (err) {
      reusable = false;
      throw err;
    } finally {
      if (reusable && c.usable) this.idle.push(c);
      else c.close();
    }
  }

  close(): void {
    for (const c of this.idle) c.close();
    this.idle = [];
  }
}

/**
 * Unset fields as `null`, in nested records too: the driver's choice, not Kong's. Kong's schema
 * fills them with ngx.null (kong/db/schema/init.lua `handle_missing_field`, 3.9.3), but the
 * plugins iterator reads plugins without `nulls` (plugins_iterator.lua `GLOBAL_QUERY_OPTS`;
 * db/dao/init.lua `row_to_entity`), so `process_auto_fields("select")` turns them into nil at every
 * level and cjson omits them. `null` is kept as the harder case for the plugins' validation
 * (JSON `null` is not `undefined`); a plugin must accept both.
 */
function withNulls(fields: SchemaFields, value: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...value };
  for (const entry of fields)
    for (const [k, def] of Object.entries(entry) as [string, FieldDef][]) {
      if (!(k in out) || out[k] === undefined) out[k] = null;
      else if (def.type === 'record' && def.fields && isRecord(out[k]))
        out[k] = withNulls(def.fields, out[k] as Record<string, unknown>);
    }
  return out;
}

function isRecord(v: unknown): boolean {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
