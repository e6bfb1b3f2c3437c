/**
 * The operators' side of a refusal: where it happened (the replica's URL), which the client's
 * message omits, logged at most once per error code every 10 s so an overload does not flood the
 * log. Apart from the service (router.ts) because it is state of its own, kept across requests.
 */
import type { FleetRuntime } from '../runtime';

const INTERNAL_LOG_EVERY_MS = 10_000;

/** Per error code: when its detail was last logged, and how many were not since. */
export class RefusalLog {
  private readonly logged = new Map<string, { at: number; suppressed: number }>();

  log(rt: FleetRuntime, code: string, detail: string): void {
    const now = rt.clock.now();
    const last = this.logged.get(code);
    if (last && now - last.at < INTERNAL_LOG_EVERY_MS) {
      last.suppressed++;
      return;
    }
    const more = last?.suppressed ? ` (and ${last.suppressed} more like it since the last line)` : '';
    this.logged.set(code, { at: now, suppressed: 0 });
    rt.log.warn(detail + more);
  }
}
