import { holdUnseenBusy } from './adapters/unseen-busy';
import { HttpReplicaApi } from './backends/http-replica-api';
import { checkReplica } from './doctor/check';
import type { Poller } from './fleet/poller';
import type { FleetRuntime } from './runtime';

/** What the wiring needs of the runtime's router configurations. */
export interface WiringHooks {
  /** The `max_loaded_adapters` a router configuration set for `url`, if one routes there. */
  maxLoadedAdapters(url: string): number | undefined;
  /** Whether a router configuration manages this adapter (a poll adopts only those). */
  isManaged(name: string, path: string): boolean;
  /** A poll of `url` answered: unload the excess over the limit once idle. */
  trimAfterPoll(url: string): void;
}

/**
 * Connects a runtime's parts once it is built: the adapter manager's calls to the load times and
 * metrics, the poller's rounds to the preflight check, the replica's word, the lease expiries,
 * the operator's log and the work model.
 */
export function wireRuntime(rt: FleetRuntime, hooks: WiringHooks): void {
  rt.manager.addCallListener((r) => {
    rt.loadTimes.observe(r);
    const counter = r.op === 'load' ? rt.metrics.loads : rt.metrics.unloads;
    counter.inc({ result: r.ok ? 'ok' : 'error' });
    if (r.op === 'load' && r.ok) rt.metrics.loadSeconds.observe(r.ms / 1000);
    if (r.ok)
      rt.metrics.recent.record(
        r.op === 'load' ? 'loads' : 'unloads',
        rt.clock.now(),
        r.op === 'load' ? r.ms : undefined,
      );
  });
  // A load stops the replica's engine: the work model counts it for the requests sent there meanwhile.
  rt.manager.onLoadCall = (url, adapter) => {
    if (!rt.predictsWork) return undefined;
    const ended = rt.work.engineLoads.begun(url, rt.clock.now(), rt.loadTimes.load(adapter));
    return () => ended(rt.clock.now());
  };
  // Over HTTP, each replica's preflight check once, when the poller first meets it.
  if (rt.api instanceof HttpReplicaApi) {
    const http = rt.api.http;
    rt.poller.preflight = (spec) => {
      const max = hooks.maxLoadedAdapters(spec.url);
      return checkReplica(http, spec.url, {
        backend: spec.backend,
        ...(max === undefined ? {} : { maxLoadedAdapters: max }),
        timeoutMs: rt.poller.timeoutMs,
        nowUnix: rt.clock.now() / 1000,
        now: () => rt.clock.now(),
      });
    };
  }
  // The fresh scrape before an unload is bounded like a poll.
  rt.manager.replicaWord.timeoutMs = () => rt.poller.timeoutMs;
  rt.manager.replicaWord.addWithheldListener((w) => rt.metrics.unloadsWithheld.inc({ reason: w.reason }));
  rt.poller.isManaged = hooks.isManaged;
  // The replica's word before a load classifies its registry as a poll does, and a poll adopts
  // what it holds unseen, so the usual unload path can make room there.
  rt.manager.replicaWord.isManaged = rt.poller.isManaged;
  // A poll asked for out of turn (below): its failure is the round's to see again; here only logged.
  const pollAsked = (poller: Poller, url: string, afresh: boolean) =>
    poller
      .refreshUrl(url, afresh)
      .catch((err: Error) => rt.log.warn(`could not poll ${url}: ${err.message}`));
  const asked = new Map<string, number>();
  rt.replicaForgotten.push((url) => asked.delete(url));
  rt.manager.replicaWord.onUnknownResidents = (url) => {
    // Once per poll interval per replica: loads waiting for room ask every 250 ms.
    const now = rt.clock.now();
    if (now - (asked.get(url) ?? -Infinity) < rt.poller.intervalMs) return;
    asked.set(url, now);
    void pollAsked(rt.poller, url, false);
  };
  // An adapter read `unloading` only for an own unload's unpolled end waits for a poll begun after
  // that end: asked now of the runtime polling (a replaced one polls no more), not left to the next
  // round. Single flight per replica in the poller; the waits for room look again once it ended.
  // An asked poll that read nothing (timed out, the replica kept up and still chosen) is asked
  // again by the next read, no sooner than the poll timeout after this ask: else the requests held
  // waited out their timeouts for the next round (review 63), and a refusing replica, polled back
  // to back, would have its waits look again at once.
  rt.manager.ownUnloads.onUnpolled = (url) => {
    const polling = rt.current();
    const from = rt.clock.now();
    void pollAsked(polling.poller, url, true).finally(() => {
      if (!polling.manager.ownUnloads.polledSince(url, from)) {
        const wait = from + polling.poller.timeoutMs - rt.clock.now();
        if (wait > 0) rt.clock.after(wait, () => rt.manager.ownUnloads.askAgain(url));
        else rt.manager.ownUnloads.askAgain(url);
      }
      rt.manager.roomChanged.notify();
    });
  };
  // What a poll reads busy with no lease here is held from unloads, as the unload's word does.
  rt.poller.onReading = (url, load, startedMono) => {
    const word = rt.manager.replicaWord;
    const endedHere = (u: string, name: string) => word.servedEndedSince(u, name, startedMono);
    const elsewhere = (u: string, name: string) => rt.leasedElsewhereBefore(u, name, startedMono);
    const began = { clock: rt.clock, mono: startedMono };
    return holdUnseenBusy(rt.store, word, elsewhere, url, load, endedHere, began);
  };
  rt.poller.addExpiryListener((n) => rt.metrics.leasesExpired.inc(n));
  // A replica going down or coming back is rare and worth the operator's eye (docs/kong.md).
  const down = new Set<string>();
  rt.replicaForgotten.push((url) => down.delete(url));
  rt.poller.addPollListener((url, ok, ms) => {
    if (!ok) rt.metrics.pollErrors.inc({ replica: url });
    if (!ok && !down.has(url)) {
      down.add(url);
      rt.log.warn(`replica ${url} stopped answering polls`);
    } else if (ok && down.delete(url)) rt.log.warn(`replica ${url} answers polls again`);
    if (ok) hooks.trimAfterPoll(url);
    // A read of the replica begun after an own unload's end: the store no longer misses that end.
    if (ok) rt.manager.ownUnloads.polled(url, rt.clock.now() - ms);
    // Only `saturation_mode: predicted` reads the work model.
    const load = ok && rt.predictsWork ? rt.poller.lastLoad.get(url) : undefined;
    if (load) {
      const now = rt.clock.now();
      rt.work.observeReplica(url, load, now, now - ms);
      // A lease reclaimed by age leaves its work behind: forget it the same way.
      rt.work.purge(now, rt.poller.leaseMaxAgeMs);
    }
  });
}
