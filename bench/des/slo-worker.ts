import { parentPort, workerData } from 'node:worker_threads';
import type { Scenario } from './run';
import { sloPoint, type SloReply, type SloSweepOptions, type SloTask } from './slo-sweep';

/** A worker thread of the SLO sweep: runs each point it is sent and posts the result, or its failure, back. */
const { scenario, variants } = workerData as { scenario: Scenario; variants: SloSweepOptions['variants'] };
parentPort!.on('message', (t: SloTask) => {
  const reply = (r: SloReply) => parentPort!.postMessage(r);
  sloPoint(scenario, t, variants).then(
    (point) => reply({ point }),
    (err: unknown) => reply({ error: err instanceof Error ? (err.stack ?? err.message) : String(err) }),
  );
});
