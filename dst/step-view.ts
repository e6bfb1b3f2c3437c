import type { WorldView } from './invariants';
import type { RegistryLoss } from './trim-check';

/** What a StepView reads from the world, when a check asks. */
export interface WorldState {
  degraded(): boolean;
  resets(): (number | { from: number; to: number })[];
  restores(): (number | { from: number; to: number })[];
  faultOpen(): boolean;
  registryLost(): readonly RegistryLoss[];
}

/**
 * The world as the checks see it at a step. `degraded` and `resets` are read only when a check
 * needs them (a new log entry, a replica over the limit, a load call): most steps need neither,
 * and the checks run after every step.
 */
export class StepView implements WorldView {
  private d: boolean | undefined;
  private r: (number | { from: number; to: number })[] | undefined;

  constructor(
    readonly now: number,
    readonly step: number,
    readonly lastFaultAt: number,
    private readonly world: WorldState,
  ) {}

  get degraded(): boolean {
    return (this.d ??= this.world.degraded());
  }

  get resets(): readonly (number | { from: number; to: number })[] {
    return (this.r ??= this.world.resets());
  }

  get restores(): readonly (number | { from: number; to: number })[] {
    return this.world.restores();
  }

  get faultOpen(): boolean {
    return this.world.faultOpen();
  }

  get registryLost(): readonly RegistryLoss[] {
    return this.world.registryLost();
  }
}
