/** Faults the simulator can inject (`/_sim/fault` or `SimReplica.fault()`): never on an OpenAI route. */
export type Fault =
  | { kind: 'kill' }
  | { kind: 'revive' }
  | { kind: 'hang'; on: boolean }
  | { kind: 'error500'; on: boolean }
  | { kind: 'slowMetrics'; ms: number }
  | { kind: 'failLoads'; count: number; status?: number }
  | { kind: 'dead'; on: boolean }
  | { kind: 'restart'; downtimeMs?: number }
  | { kind: 'clear' };

export interface FaultState {
  killed: boolean;
  hang: boolean;
  error500: boolean;
  slowMetricsMs: number;
  failLoads: number;
  failLoadStatus: number;
  dead: boolean;
}

export function freshFaults(): FaultState {
  return {
    killed: false,
    hang: false,
    error500: false,
    slowMetricsMs: 0,
    failLoads: 0,
    failLoadStatus: 500,
    dead: false,
  };
}
