/** The source of "now", in epoch milliseconds. Injected everywhere so that tests can move time (codes, expiry). */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A clock that tests move by hand. */
export class ManualClock implements Clock {
  constructor(private current = Date.now()) {}
  now(): number {
    return this.current;
  }
  advance(ms: number): void {
    this.current += ms;
  }
}

export const toRfc3339 = (ms: number): string => new Date(ms).toISOString();
export const toEpochSeconds = (ms: number): number => Math.floor(ms / 1000);
