/**
 * kais.ts joinDashValues and unknownOnce: a long flag's value that starts with a dash reaches the flag's own check
 * (yargs would read `-Infinity` as the short flags I, n, f, ...); everything else is left as written.
 */
import { joinDashValues, unknownOnce } from '../../../kais';

describe('joinDashValues', () => {
  it.each([
    [
      ['eval', '--eta', '-Infinity'],
      ['eval', '--eta=-Infinity'],
    ],
    [
      ['train', '--eval-trace-window', '-5,10', '--frames', '2'],
      ['train', '--eval-trace-window=-5,10', '--frames', '2'],
    ],
    [
      ['eval', '--load', '-.5'],
      ['eval', '--load=-.5'],
    ],
    [
      ['eval', '--load', '-nan'],
      ['eval', '--load=-nan'],
    ],
    [
      ['eval', '--load', '-2'],
      ['eval', '--load=-2'],
    ],
  ])('%j becomes %j', (given, expected) => {
    expect(joinDashValues(given)).toEqual(expected);
  });

  it.each([
    [['eval', '--json', '--seeds', '1-3']], // a flag after a flag
    [['eval', '--load=-5']], // already joined
    [['eval', '--frames', '1', '--', '--x', '-5']], // after "--", nothing is touched
    [['eval', '-h']], // a dash and a letter other than inf / nan
  ])('%j is left alone', (given) => {
    expect(joinDashValues(given)).toEqual(given);
  });
});

describe('unknownOnce', () => {
  it.each([
    ['Unknown arguments: bogus-flag, bogusFlag', 'Unknown argument: --bogus-flag'],
    ['Unknown argument: eta', 'Unknown argument: --eta'],
    ['Unknown arguments: a-b, aB, x', 'Unknown arguments: --a-b, -x'],
    ['Missing required argument: input', 'Missing required argument: input'],
  ])('%s -> %s', (given, expected) => {
    expect(unknownOnce(given)).toBe(expected);
  });
});
