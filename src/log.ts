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
