/**
 * Who sent what to the simulated replicas, and when it reached them: what invariant (i)'s one
 * exemption reads (an unseen router's first request of an adapter, docs/reliability.md "An adapter
 * someone unseen routes is held"), never the router's counters. A proxied request names its node
 * by a header the clients add (Kong forwards it upstream); a `/metrics` ask or an unload call names
 * none, so its connection's peer is looked up among the nodes' processes (/proc, Linux).
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/** The header each client adds naming its node, and the one naming the adapter it asked for. */
export const NODE_HEADER = 'x-chaos-node';
export const ADAPTER_HEADER = 'x-chaos-adapter';

/** A request Kong proxied to a replica, as the replica saw it. */
export interface ProxiedRequest {
  replica: string;
  adapter: string;
  node: number;
  /** Its node decided alone (its log said so) when the request reached the replica. */
  alone: boolean;
  /** Wall-clock ms it reached the replica, and when the replica's answer ended (Infinity: never seen end). */
  at: number;
  ended: number;
}

/** A call of a node's own to a replica: a `/metrics` ask (its word) or an unload. */
export interface NodeCall {
  replica: string;
  /** -1: its sender was not found among the nodes' processes. */
  node: number;
  at: number;
}

/** What (i)'s exemption reads: requests proxied, and each node's `/metrics` asks and unload calls. */
export interface Witness {
  requests: readonly ProxiedRequest[];
  asks: readonly NodeCall[];
  unloads: readonly NodeCall[];
}

/** Bounded: a run past this many of each keeps the first (the exemption then excuses less, never more). */
const MAX_RECORDS = 500_000;

export class Senders implements Witness {
  readonly requests: ProxiedRequest[] = [];
  readonly asks: NodeCall[] = [];
  readonly unloads: NodeCall[] = [];
  /** `/metrics` asks and unload calls whose sender was not found among the nodes (the harness's own). */
  unattributed = 0;
  private readonly peers = new WeakMap<Socket, number | undefined>();

  constructor(
    /** The node a plugin server process id belongs to (asked afresh: a node's process may change). */
    private readonly nodeOfPid: () => Map<number, number>,
    /** Whether node `i` decides alone now (its log). */
    private readonly aloneNow: (node: number) => boolean,
  ) {}

  /** To be told of every request a replica at `replica` receives, as it arrives. */
  onRequest(replica: string, req: IncomingMessage, res: ServerResponse): void {
    const at = Date.now();
    const path = (req.url ?? '/').split('?')[0]!;
    const node = Number(req.headers[NODE_HEADER]);
    const adapter = req.headers[ADAPTER_HEADER];
    if (Number.isInteger(node) && typeof adapter === 'string') {
      if (this.requests.length >= MAX_RECORDS) return;
      const r: ProxiedRequest = { replica, adapter, node, alone: this.aloneNow(node), at, ended: Infinity };
      this.requests.push(r);
      res.once('close', () => (r.ended = Date.now()));
      return;
    }
    const list = path === '/metrics' ? this.asks : path === '/v1/unload_lora_adapter' ? this.unloads : null;
    if (!list || list.length >= MAX_RECORDS) return;
    const peer = this.peerNode(req.socket);
    // One from no node is kept as node -1: the check then trusts no ask of that replica around it.
    list.push({ replica, node: peer ?? -1, at });
    if (peer === undefined) this.unattributed++;
  }

  /** How much it saw, for the report: a witness that saw nothing excuses nothing. */
  counts(): { requests: number; asks: number; unloads: number; unattributed: number } {
    const { requests, asks, unloads, unattributed } = this;
    const found = (l: NodeCall[]) => l.filter((c) => c.node >= 0).length;
    return { requests: requests.length, asks: found(asks), unloads: found(unloads), unattributed };
  }

  /** The node whose process holds the other end of `s` (a loopback connection), once per connection. */
  private peerNode(s: Socket): number | undefined {
    if (this.peers.has(s)) return this.peers.get(s);
    const node =
      s.remotePort !== undefined && s.localPort !== undefined
        ? ownerOf(s.remotePort, s.localPort, this.nodeOfPid())
        : undefined;
    this.peers.set(s, node);
    return node;
  }
}

/** The node owning the loopback socket bound to `port` and connected to `peerPort`, by /proc. */
function ownerOf(port: number, peerPort: number, nodeOfPid: Map<number, number>): number | undefined {
  let inode: string | undefined;
  try {
    for (const line of readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // local_address rem_address ... inode (10th field), ports in hex.
      if (f.length < 10) continue;
      if (parseInt(f[1]!.split(':')[1]!, 16) === port && parseInt(f[2]!.split(':')[1]!, 16) === peerPort) {
        inode = f[9];
        break;
      }
    }
  } catch {
    return undefined;
  }
  if (inode === undefined) return undefined;
  const want = `socket:[${inode}]`;
  for (const [pid, node] of nodeOfPid) {
    try {
      for (const fd of readdirSync(`/proc/${pid}/fd`))
        if (readlinkSync(`/proc/${pid}/fd/${fd}`) === want) return node;
    } catch {
      // The process is gone: not this one.
    }
  }
  return undefined;
}
