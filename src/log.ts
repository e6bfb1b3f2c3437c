/** Where the core reports what operators should see. The plugins log to stderr, which Kong
 * copies into its error log; tests and the benchmark pass a collecting or silent logger. */
export interface Logger {
  info(msg: string): void;
  warn(msg: string): void;
  error(msg: string): void;
}

export const stderrLogger: Logger = {
  info: (m) => process.stderr.write(`[kong-lora-router] info: ${m}\n`),
  warn: (m) => process.stderr.write(`[kong-lora-router] warn: ${m}\n`),
  error: (m) => process.stderr.write(`[kong-lora-router] error: ${m}\n`),
};

export const silentLogger: Logger = { info: () => {}, warn: () => {}, error: () => {} };

/**
 * Warnings and errors waiting for a request to carry them into Kong's error log. Kong copies
 * the plugin server's stderr at INFO (Kong/kong 3.9.3 kong/runloop/plugin_servers/process.lua
 * `grab_logs`), which the default `log_level = notice` drops; `kong.log.warn/err` from a
 * handler is logged at its own level. Bounded: the oldest are dropped (stderr keeps them all).
 */
export class PendingNotices implements Logger {
  private pending: { level: 'warn' | 'err'; msg: string }[] = [];

  constructor(
    private readonly inner: Logger,
    private readonly max = 20,
  ) {}

  info(msg: string): void {
    this.inner.info(msg);
  }

  warn(msg: string): void {
    this.inner.warn(msg);
    this.push('warn', msg);
  }

  error(msg: string): void {
    this.inner.error(msg);
    this.push('err', msg);
  }

  get size(): number {
    return this.pending.length;
  }

  /** Takes what is pending, for `kong.log[level]`. */
  drain(): { level: 'warn' | 'err'; msg: string }[] {
    const out = this.pending;
    this.pending = [];
    return out;
  }

  private push(level: 'warn' | 'err', msg: string): void {
    this.pending.push({ level, msg: `[kong-lora-router] ${msg}` });
    if (this.pending.length > this.max) this.pending.splice(0, this.pending.length - this.max);
  }
}

/** This plugin-server process's operator log: stderr, and notices for the next request at hand. */
export const operatorLog = new PendingNotices(stderrLogger);

/** `kong.log`, as far as notices need it (structural: the core imports no PDK). */
export interface RequestLog {
  warn(msg: string): Promise<unknown>;
  err(msg: string): Promise<unknown>;
}

/** Writes notices through the request's `kong.log`, each at its own level: one PDK call each. */
export async function writeNotices(
  log: RequestLog,
  notices: { level: 'warn' | 'err'; msg: string }[] = operatorLog.drain(),
): Promise<void> {
  for (const n of notices) await (n.level === 'err' ? log.err(n.msg) : log.warn(n.msg));
}

/**
 * `log` for each distinct message once (the last `max` remembered): for what a configuration
 * says, which Kong hands to every instance it starts, on every worker.
 */
export function onceEach(log: (msg: string) => void, max = 64): (msg: string) => void {
  const seen = new Set<string>();
  return (msg) => {
    if (seen.has(msg)) return;
    seen.add(msg);
    if (seen.size > max) seen.delete(seen.values().next().value!);
    log(msg);
  };
}

/** A deprecated config name, told operators once per process, whichever plugin's config says it. */
export const warnDeprecated = onceEach((msg) => operatorLog.warn(msg));
