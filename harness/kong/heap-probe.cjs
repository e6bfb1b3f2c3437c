// Preload for the plugin server (the soak test, the benchmark's exit run): on SIGUSR2, collect garbage and print the heap in
// use, so a soak can compare memory without a debugger.
process.on('SIGUSR2', () => {
  globalThis.gc?.();
  globalThis.gc?.();
  process.stderr.write(`heap-probe ${process.memoryUsage().heapUsed}\n`);
});
