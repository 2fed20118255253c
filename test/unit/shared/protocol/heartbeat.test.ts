/** HeartbeatClock on a hand-driven clock: which ticks may judge a silent peer. */
import { HeartbeatClock } from '../../../../shared/protocol/heartbeat';

describe('HeartbeatClock', () => {
  it('judges on-time ticks, not one that fired late because this process stalled', () => {
    let now = 0;
    const clock = new HeartbeatClock(1000, () => now);
    now = 1000;
    expect(clock.onTime()).toBe(true);
    now = 2100; // 100 ms late: within a tenth of the period
    expect(clock.onTime()).toBe(true);
    now = 3201; // 101 ms late
    expect(clock.onTime()).toBe(false);
    now = 4201; // the next one is measured from the late tick
    expect(clock.onTime()).toBe(true);
  });

  it('allows at least 20 ms of timer slack on a short period', () => {
    let now = 0;
    const clock = new HeartbeatClock(100, () => now);
    now = 120;
    expect(clock.onTime()).toBe(true);
    now = 241;
    expect(clock.onTime()).toBe(false);
  });
});
