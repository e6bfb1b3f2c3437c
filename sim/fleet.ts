import { SimReplica, type ReplicaOptions } from './http/replica';

/** Several simulated replicas in one process, each on its own loopback port. */
export class SimFleet {
  private constructor(readonly replicas: SimReplica[]) {}

  /** Starts one replica per spec (`port: 0` = ephemeral) and returns when all listen. */
  static async start(specs: ReplicaOptions[]): Promise<SimFleet> {
    const replicas = specs.map((s) => new SimReplica(s));
    try {
      for (const r of replicas) await r.start();
    } catch (err) {
      await Promise.all(replicas.map((r) => r.stop()));
      throw err;
    }
    return new SimFleet(replicas);
  }

  get urls(): string[] {
    return this.replicas.map((r) => r.url);
  }

  byUrl(url: string): SimReplica | undefined {
    return this.replicas.find((r) => r.url === url);
  }

  async stop(): Promise<void> {
    await Promise.all(this.replicas.map((r) => r.stop()));
    // Settle in-flight engine work so nothing fires after a test ends.
    for (const r of this.replicas) r.engine.reset();
  }
}

export { SimReplica };
export type { ReplicaOptions };
