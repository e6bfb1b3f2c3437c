import { parentPort, workerData } from 'node:worker_threads';
import type { Scenario } from './run';
import { sloPoint, type SloSweepOptions, type SloTask } from './slo-sweep';

/** A worker thread of the SLO sweep: runs each point it is sent and posts the result back. */
const { scenario, variants } = workerData as { scenario: Scenario; variants: SloSweepOptions['variants'] };
parentPort!.on('message', (t: SloTask) => {
  void sloPoint(scenario, t, variants).then((p) => parentPort!.postMessage(p));
});
