/**
 * A token bucket: `rate` tokens a second, at most `burst` held, full at the start. The orchestrator's
 * intake limits each agent session's bytes, frames and transitions with it (orchestrator/intake.ts);
 * the agent limits its error replies to a peer that floods it (agent/runtime.ts).
 */
export class TokenBucket {
  private tokens: number;
  private last: number;

  constructor(
    private readonly rate: number,
    private readonly burst: number,
    /** ms, on the clock later calls of take() use. */
    now: number,
  ) {
    this.tokens = burst;
    this.last = now;
  }

  /** Takes n tokens at time `now` (ms) if the bucket holds them; false (and nothing taken) if not. */
  take(n: number, now: number): boolean {
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) / 1000) * this.rate);
    this.last = now;
    if (n > this.tokens) return false;
    this.tokens -= n;
    return true;
  }
}
