/**
 * What the fleet's Lua scripts answer, read back into the store's types: RedisFleetStore's
 * decoding of replies, apart from the store's connection, heartbeat and operations.
 */
import { samePath } from '../replica-record';
import type {
  AdapterRef,
  Lease,
  LlamaAdapter,
  ReplicaSpec,
  ReplicaView,
  Residency,
  ResidentAdapter,
} from '../types';

/** A script's reply as ioredis gives it. */
export type Reply = string | number | null | Reply[];

/**
 * The `views` script's reply (scripts/residency.ts `VIEWS_FN`; also the first half of
 * `viewsAndLease`'s): each replica's view with the adapter's presence, and the epoch and live
 * node count it carries.
 */
export function viewsReply(
  reply: Reply,
  adapter: AdapterRef | undefined,
  withResidents: boolean,
): { views: ReplicaView[]; epoch: string | null; nodes: [number, number] } {
  const [placed, rows, epoch, nodes] = reply as [string | null, Reply[][], string | null, [number, number]];
  const out: ReplicaView[] = [];
  for (const row of rows) {
    const [url, spec, figures, res, busy, allRes, allBusy, own] = row as [
      string,
      string,
      string[],
      string | null,
      string | null,
      string[] | null,
      string[] | null,
      string | null,
    ];
    const r = pairs(figures);
    const v = viewOf(url, JSON.parse(spec) as ReplicaSpec, r);
    // Asked by a node (the views script's `node`): its own leases among `inFlight`.
    if (own !== null && own !== undefined) v.ownInFlight = Number(own);
    if (adapter) {
      if (v.backend === 'llamacpp') {
        const hit =
          adapter.path === undefined ? undefined : llamaOf(r).find((e) => samePath(e.path, adapter.path!));
        if (hit) v.adapter = { state: 'static', lastUsed: 0, inFlight: Number(busy ?? 0), llamaId: hit.id };
      } else if (res !== null) {
        const p = JSON.parse(res) as Residency;
        v.adapter = { state: p.state, lastUsed: p.lastUsed, inFlight: Number(busy ?? 0) };
      } else if (placed === url) {
        // Another router placed this cold adapter here and is about to load it.
        v.adapter = { state: 'loading', lastUsed: 0, inFlight: 0, placed: true };
        v.residentCount++;
      }
    }
    if (withResidents) v.residents = residentsOf(allRes ?? [], allBusy ?? []);
    out.push(v);
  }
  return { views: out, epoch, nodes };
}

export function pairs(flat: string[]): Map<string, string> {
  const m = new Map<string, string>();
  for (let i = 0; i + 1 < flat.length; i += 2) m.set(flat[i]!, flat[i + 1]!);
  return m;
}

function num(s: string | undefined): number | null {
  return s === undefined ? null : Number(s);
}

export function viewOf(url: string, spec: ReplicaSpec, r: Map<string, string>): ReplicaView {
  return {
    url,
    backend: spec.backend,
    priority: spec.priority,
    health: (r.get('health') ?? 'unknown') as ReplicaView['health'],
    snapshotAt: num(r.get('snapshotAt')),
    checkedAt: num(r.get('checkedAt')),
    lastError: r.get('lastError'),
    waiting: Number(r.get('waiting') ?? 0),
    running: Number(r.get('running') ?? 0),
    kvUsage: num(r.get('kvUsage')) ?? undefined,
    inFlight: Number(r.get('inFlight') ?? 0),
    residentCount: Number(r.get('residents') ?? 0),
    loadsUnderWay: num(r.get('loads')) ?? undefined,
    loadsSince: num(r.get('loadsSince')) ?? undefined,
    llamaIds: spec.backend === 'llamacpp' ? llamaOf(r).map((a) => a.id) : undefined,
  };
}

export function llamaOf(r: Map<string, string>): LlamaAdapter[] {
  const raw = r.get('llama');
  // cjson cannot tell an empty array from an empty object; the JSON here came from JS.
  return raw ? (JSON.parse(raw) as LlamaAdapter[]) : [];
}

/** `heldFlat`: the `residents` script's leases' ages, name then ms (asked with a time only). */
export function residentsOf(resFlat: string[], busyFlat: string[], heldFlat?: string[]): ResidentAdapter[] {
  const busy = pairs(busyFlat);
  const held = pairs(heldFlat ?? []);
  const out: ResidentAdapter[] = [];
  for (const [name, raw] of pairs(resFlat)) {
    const r = JSON.parse(raw) as Residency;
    const leasedFor = held.get(name);
    out.push({
      name,
      state: r.state,
      since: r.since,
      lastUsed: r.lastUsed,
      inFlight: Number(busy.get(name) ?? 0),
      ...(leasedFor === undefined ? {} : { leasedFor: Number(leasedFor) }),
    });
  }
  return out;
}

export function leaseOf(raw: string): Lease {
  const l = JSON.parse(raw) as { id: string; url: string; adapter: string; at: number };
  return { id: l.id, url: l.url, adapter: l.adapter === '' ? null : l.adapter, at: l.at };
}
