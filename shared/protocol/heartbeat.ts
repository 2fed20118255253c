/**
 * When a heartbeat may call a silent peer dead: the rule shared by the hub and the agent link.
 *
 * Both ends tick every `periodMs`: a peer that sent nothing (message, ping or pong) since the
 * previous tick is dead, the others are pinged. That judgment is only fair when this process could
 * read during the period. After a stall of its own (a GC pause, a starved CPU on a busy machine, a
 * long synchronous step) Node runs the overdue timer *before* it reads the socket data that came in
 * meanwhile, so the peer's pong may be sitting unread when the tick finds it silent. Live, that
 * evicted a healthy agent (close 1006) on a loaded CI machine.
 *
 * So a tick that fires late (by more than a tenth of the period, at least 20 ms) judges nobody: it
 * pings again and the peer gets one more whole period. A dead peer is then gone within two periods
 * of on-time ticks, as before; a stalling process takes one period longer to notice it.
 */
export class HeartbeatClock {
  private last: number;
  private readonly slackMs: number;

  constructor(
    private readonly periodMs: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.last = now();
    this.slackMs = Math.max(periodMs / 10, 20);
  }

  /** Call once per tick: true when the tick is on time, so silence since the previous one is the peer's. */
  onTime(): boolean {
    const t = this.now();
    const late = t - this.last - this.periodMs;
    this.last = t;
    return late <= this.slackMs;
  }
}
