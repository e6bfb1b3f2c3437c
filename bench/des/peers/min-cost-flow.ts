/**
 * Min-cost flow by successive shortest paths (Bellman-Ford queue, so edge costs may be negative
 * as long as no cycle is): what Dynamo's LoRA placement solves (lib/llm/src/lora/routing/
 * min_cost_flow.rs, which runs Dijkstra on Johnson potentials; the flows and costs are the same).
 */
export class MinCostFlow {
  private readonly to: number[] = [];
  private readonly cap: number[] = [];
  private readonly cost: number[] = [];
  private readonly out: number[][];

  constructor(readonly nodes: number) {
    this.out = Array.from({ length: nodes }, () => []);
  }

  /** An edge u -> v; returns its id for `flow`. */
  edge(u: number, v: number, cap: number, cost: number): number {
    const id = this.to.length;
    this.to.push(v, u);
    this.cap.push(cap, 0);
    this.cost.push(cost, -cost);
    this.out[u]!.push(id);
    this.out[v]!.push(id + 1);
    return id;
  }

  /** Flow on edge `id` after `solve`. */
  flow(id: number): number {
    return this.cap[id + 1]!;
  }

  /** Sends up to `limit` units from s to t at least cost; returns the units sent and their cost. */
  solve(s: number, t: number, limit = Infinity): { flow: number; cost: number } {
    let flow = 0;
    let total = 0;
    const n = this.nodes;
    while (flow < limit) {
      const dist = new Array<number>(n).fill(Infinity);
      const via = new Array<number>(n).fill(-1);
      const queued = new Array<boolean>(n).fill(false);
      dist[s] = 0;
      const queue = [s];
      queued[s] = true;
      for (let h = 0; h < queue.length; h++) {
        const u = queue[h]!;
        queued[u] = false;
        for (const e of this.out[u]!) {
          if (this.cap[e]! <= 0) continue;
          const v = this.to[e]!;
          const d = dist[u]! + this.cost[e]!;
          if (d < dist[v]!) {
            dist[v] = d;
            via[v] = e;
            if (!queued[v]) {
              queued[v] = true;
              queue.push(v);
            }
          }
        }
      }
      if (dist[t] === Infinity) break;
      let push = limit - flow;
      for (let v = t; v !== s; v = this.to[via[v]! ^ 1]!) push = Math.min(push, this.cap[via[v]!]!);
      for (let v = t; v !== s; v = this.to[via[v]! ^ 1]!) {
        this.cap[via[v]!]! -= push;
        this.cap[via[v]! ^ 1]! += push;
      }
      flow += push;
      total += push * dist[t]!;
    }
    return { flow, cost: total };
  }
}
