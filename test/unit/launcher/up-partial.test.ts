/**
 * kais up's partial summary (Ctrl-C) as text: the counts so far, then a line per child that exited on
 * its own and the orchestrator's restarts, when there were any.
 */
import { formatPartial, type PartialSummary } from '../../../launcher/up';

const base: PartialSummary = {
  interrupted: true,
  elapsedS: 12.5,
  durationS: 60,
  scenario: 'tiny',
  workload: 'p4',
  speed: 1,
  policy: 'jsq',
  sent: 200,
  completedInTime: 150,
  late: 10,
  refused: 5,
  unanswered: 0,
  open: 35,
  throughputRate: 0.75,
  evalPolicy: 'jsq/static',
  evalThroughputRate: 0.8,
};

describe('formatPartial', () => {
  it('says nothing of exits and restarts when there were none', () => {
    expect(formatPartial(base, 60)).toBe(
      'kais up: interrupted after 12.5 s of 60 s (tiny, p4, speed 1, policy jsq)\n' +
        'sent 200: in time 150, late 10, refused 5, unanswered 0, still open 35; throughput rate so far 75.0% (kais eval predicts jsq/static 80.0% for the whole run)',
    );
  });

  it('adds a line per child exit and the orchestrator restarts', () => {
    const text = formatPartial(
      {
        ...base,
        childExits: [{ name: 'orchestrator', pid: 42, code: null, signal: 'SIGKILL', atS: 3.1, lastLine: '' }],
        orchestratorRestarts: 2,
      },
      60,
    );
    expect(text.split('\n').slice(2)).toEqual(['  orchestrator exited (SIGKILL) after 3.1 s', '  orchestrator restarts 2']);
  });

  it('before the load generator started: one line', () => {
    expect(formatPartial(null, 60)).toBe('kais up: interrupted before any request was sent (of 60 s planned)');
  });

  it('before the load generator started, with what was known: the prediction and the children that exited (as --json has them)', () => {
    const text = formatPartial(
      {
        ...base,
        elapsedS: 0,
        sent: 0,
        beforeLoad: true,
        childExits: [{ name: 'node', pid: 7, code: 1, signal: null, atS: 0.8, lastLine: 'disk full' }],
      },
      60,
    );
    expect(text.split('\n')).toEqual([
      'kais up: interrupted before any request was sent (of 60 s planned); kais eval predicts jsq/static 80.0% for the whole run',
      '  node exited (1) after 0.8 s: disk full',
    ]);
  });
});
