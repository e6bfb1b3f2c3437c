/**
 * Kong's nginx workers as the plugin server sees them: each worker keeps its own table of
 * plugin instances (`running_instances`, module-level in Kong/kong 3.9.3
 * `kong/runloop/plugin_servers/plugin.lua`; 3.8.1 `kong/runloop/plugin_servers/init.lua`) and
 * starts an instance lazily, on the first request it runs through a plugin config
 * (`get_instance_id`).
 */
import type { KongDriver } from './driver';
import type { KongRequest } from './pdk';
import { RpcError } from './rpc';

/** One configured plugin, as a loaded Kong config holds it: the config Kong sends, keys included. */
export interface PluginEntity {
  name: string;
  /** From `kongConfig`: `__plugin_id` (the instance table's key) and `__seq__` included. */
  conf: Record<string, unknown>;
}

interface Running {
  name: string;
  seq: unknown;
  id?: number;
  /**
   * Set while some request of this worker starts the instance. Kong waits in `ngx.sleep(0.1)`
   * steps up to 10 s, then drops the claim and fails with "Could not claim instance_id" (plugin.lua
   * `get_instance_id` SLEEP_STEP/WAIT_TIME, 3.9.3; 3.8.1 init.lua); the driver waits for the start
   * to end (bounded by the RPC timeout).
   */
  starting?: Promise<void>;
}

export class KongWorker {
  private readonly running = new Map<string, Running>();
  /** Lua errors and `kong.log.err` lines of this worker (what Kong's error.log would show). */
  readonly errors: string[] = [];

  constructor(
    private readonly node: KongNode,
    readonly index: number,
  ) {}

  /** Instances this worker currently holds, by plugin id. */
  get instances(): { name: string; id: number; pluginId: string; seq: number }[] {
    return [...this.running.entries()]
      .filter(([, r]) => r.id !== undefined)
      .map(([k, r]) => ({ name: r.name, id: r.id!, pluginId: k, seq: r.seq as number }));
  }

  /**
   * `get_instance_id` (plugin.lua 3.9.3): reuse the instance started for this plugin id and
   * `__seq__`; otherwise start one with this config and close the one it replaces (errors
   * ignored). A config from another `__seq__` (a log phase of a request that began before a
   * reload) therefore starts an old-config instance and closes the current one. A failed
   * StartInstance raises (a 500 in access).
   */
  async instanceId(p: PluginEntity): Promise<number> {
    const key = String(p.conf.__plugin_id);
    let info = this.running.get(key);
    while (info?.starting) {
      await info.starting;
      info = this.running.get(key);
    }
    if (info && info.id !== undefined && info.seq === p.conf.__seq__) return info.id;
    const oldId = info?.id;
    const claim: Running = info ?? { name: p.name, seq: p.conf.__seq__ };
    claim.id = undefined;
    let done!: () => void;
    claim.starting = new Promise((r) => (done = r));
    this.running.set(key, claim);
    let id: number;
    try {
      const started = await this.node.driver.startConfigured(p.name, p.conf);
      id = started.Id;
      Object.assign(claim, { id, seq: p.conf.__seq__, name: p.name });
    } catch (err) {
      this.running.delete(key);
      this.errors.push(`starting instance: ${(err as Error).message}`);
      throw err;
    } finally {
      claim.starting = undefined;
      done();
    }
    if (oldId !== undefined) await this.node.driver.closeInstance(oldId).catch(() => undefined);
    // Kong returns `instance_info.id`, which a concurrent start may have cleared meanwhile (a
    // HandleEvent for nil, "no plugin instance", a reset and a retry): the id started here is
    // where that retry ends up.
    return id;
  }

  /**
   * `reset_instances_for_plugin` (plugin.lua 3.9.3): forget this worker's instances of a plugin. A
   * claim still starting has no `plugin_name` in Kong yet, so it is not matched: kept here too.
   */
  reset(name: string): void {
    for (const [k, r] of this.running) if (r.name === name && !r.starting) this.running.delete(k);
  }

  /**
   * One phase of one plugin for `req`, as Kong's plugin handler runs it (`Rpc:handle_event`,
   * mp_rpc.lua 3.9.3). "no plugin instance" resets the plugin's instances on every worker and
   * tries again; any other RPC failure is logged and the request goes on without the plugin.
   */
  async run(p: PluginEntity, phase: string, req: KongRequest): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      let id: number;
      try {
        id = await this.instanceId(p);
      } catch (err) {
        // `error(err)` in get_instance_id: a Lua error, Kong's 500 (only logged in the log timer).
        const msg = `${p.name}: starting instance: ${(err as Error).message}`;
        if (phase === 'log') req.luaErrors.push(msg);
        else req.raised(msg);
        return;
      }
      try {
        await this.node.driver.handleEvent(id, phase, req);
        return;
      } catch (err) {
        const msg = (err as Error).message;
        // Kong retries without bound (`return self:handle_event(conf, phase)`, mp_rpc.lua 3.9.3;
        // 3.8.1 alike); the driver's bound of 5 keeps a broken server from hanging a test.
        if (err instanceof RpcError && /no plugin instance/i.test(msg) && attempt < 5) {
          this.errors.push(`[warn] ${msg}`);
          this.node.resetInstances(p.name);
          continue;
        }
        this.errors.push(msg);
        this.node.onError?.(`${p.name} ${phase} failed: ${msg}`);
        return;
      }
    }
  }
}

/**
 * One Kong node: its workers. Kong's `nginx_worker_processes = auto` (templates/kong_defaults.lua,
 * kong.conf.default, 3.9.3) is one per CPU core (nginx `worker_processes auto`); the driver's
 * default of 2 (a 2-core machine) is its own choice, so cross-worker behaviour is exercised.
 */
export class KongNode {
  readonly workers: KongWorker[];
  private next = 0;
  onError?: (msg: string) => void;

  constructor(
    readonly driver: KongDriver,
    workers = 2,
  ) {
    this.workers = Array.from({ length: Math.max(1, workers) }, (_, i) => new KongWorker(this, i));
  }

  /** The worker nginx hands the next connection to: round robin is the driver's choice (nginx's is not fixed). */
  pick(): KongWorker {
    return this.workers[this.next++ % this.workers.length]!;
  }

  /**
   * `reset_instance` (plugin.lua 3.9.3): the plugin's instances are forgotten here and, through
   * the worker event "plugin_server"/"reset_instances" (plugin_servers/init.lua 3.9.3), on every worker.
   */
  resetInstances(name: string): void {
    for (const w of this.workers) w.reset(name);
  }
}
