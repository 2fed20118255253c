/**
 * `kais agent --targets`: every URL is checked at start as the proxy and the telemetry poller will
 * use it (exit 2, one line naming the file and the field). A URL that only looked like one
 * (`http://127.0.0.1:99999`) passed and crashed the agent at its first request; `https://` was
 * spoken to in plain HTTP (a node's crashed the poller); a trailing `/` made every request `//serve`.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { readTargets } from '../../../agent/cli';
import { tmpDir } from '../../support/tmp';

const dir = tmpDir('kais-targets-');
const file = (nodes: string[], cloud: string): string => {
  const f = path.join(dir, `t${Math.random().toString(36).slice(2)}.json`);
  fs.writeFileSync(f, JSON.stringify({ nodes, cloud }));
  return f;
};
const ok = 'http://127.0.0.1:8001';

describe('readTargets', () => {
  it('takes http://host:port, and drops a trailing /', () => {
    expect(readTargets(file([ok, 'http://127.0.0.1:8002/'], 'http://edge-cloud:80/'), 2)).toEqual({
      nodes: [ok, 'http://127.0.0.1:8002'],
      cloud: 'http://edge-cloud',
    });
  });

  it.each([
    [[ok, 'http://127.0.0.1:99999'], ok, /: nodes\[1\] "http:\/\/127\.0\.0\.1:99999" is not a URL$/],
    [[ok, ok], 'http://[::1', /: cloud "http:\/\/\[::1" is not a URL$/],
    [[ok, 'https://127.0.0.1:8443'], ok, /: nodes\[1\] "https:\/\/127\.0\.0\.1:8443": targets speak plain HTTP \(http:\/\/host:port\)$/],
    [[ok, ok], 'http://cloud:80/v1', /: cloud "http:\/\/cloud:80\/v1": only http:\/\/host:port \(no path, query or user\)$/],
    [[ok, ok], 'http://cloud:80?x=1', /: cloud "http:\/\/cloud:80\?x=1": only http:\/\/host:port/],
    [['ftp://x', ok], ok, /: nodes\[0\] "ftp:\/\/x": targets speak plain HTTP/],
  ])('refuses %j / %s in one line naming the file and the field', (nodes, cloud, line) => {
    const f = file(nodes, cloud);
    expect(() => readTargets(f, 2)).toThrow(line);
    expect(() => readTargets(f, 2)).toThrow(/^--targets: \S+\.json: /);
  });
});
