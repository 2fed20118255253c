/**
 * `kais agent --targets`: every URL is checked at start as the proxy and the telemetry poller will
 * use it (exit 2, one line naming the file and the field). A URL that only looked like one
 * (`http://127.0.0.1:99999`) passed and crashed the agent at its first request; `https://` was
 * spoken to in plain HTTP (a node's crashed the poller); a trailing `/` made every request `//serve`.
 */
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import { readTargets } from '../../../agent/cli';
import { Proxy } from '../../../agent/proxy';
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
    [[ok, 'http://127.0.0.1:99999'], 'http://cloud', /: nodes\[1\] "http:\/\/127\.0\.0\.1:99999" is not a URL$/],
    [[ok, 'http://127.0.0.1:8002'], 'http://[::1', /: cloud "http:\/\/\[::1" is not a URL$/],
    [
      [ok, 'https://127.0.0.1:8443'],
      'http://cloud',
      /: nodes\[1\] "https:\/\/127\.0\.0\.1:8443": targets speak plain HTTP \(http:\/\/host:port\)$/,
    ],
    [
      [ok, 'http://127.0.0.1:8002'],
      'http://cloud:80/v1',
      /: cloud "http:\/\/cloud:80\/v1": only http:\/\/host:port \(no path, query or user\)$/,
    ],
    [[ok, 'http://127.0.0.1:8002'], 'http://cloud:80?x=1', /: cloud "http:\/\/cloud:80\?x=1": only http:\/\/host:port/],
    [['ftp://x', ok], 'http://cloud', /: nodes\[0\] "ftp:\/\/x": targets speak plain HTTP/],
    // port 0 is no server's: every request failed and went to the cloud, unsaid
    [[ok, 'http://127.0.0.1:0'], 'http://cloud', /: nodes\[1\] "http:\/\/127\.0\.0\.1:0": port 0 is not a server's port$/],
    // one server listed twice was judged and loaded as two
    [[ok, 'http://127.0.0.1:8002'], 'http://127.0.0.1:8002/', /: cloud "http:\/\/127\.0\.0\.1:8002" is nodes\[1\]'s URL too$/],
    [[ok, ok], 'http://cloud', /: nodes\[1\] "http:\/\/127\.0\.0\.1:8001" is nodes\[0\]'s URL too$/],
  ])('refuses %j / %s in one line naming the file and the field', (nodes, cloud, line) => {
    const f = file(nodes, cloud);
    expect(() => readTargets(f, 2)).toThrow(line);
    expect(() => readTargets(f, 2)).toThrow(/^--targets: \S+\.json: /);
  });
});

describe('Proxy', () => {
  it('reaches a target at an IPv6 address (http://[::1]:port was looked up as the name "[::1]": every request refused)', async () => {
    const server = http.createServer((_req, res) => res.end(JSON.stringify({ procMs: 12 })));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '::1', resolve);
    });
    const proxy = new Proxy(4);
    try {
      const { port } = server.address() as AddressInfo;
      const target = readTargets(file([`http://[::1]:${port}`, ok], 'http://cloud'), 2).nodes[0];
      expect(target).toBe(`http://[::1]:${port}`);
      expect(await proxy.forward(target, 0, 1, 5000)).toMatchObject({ kind: 'served', status: 200, procMs: 12 });
      // and through the per-request path (a base URL the endpoint cache does not parse)
      expect(await proxy.forward(`${target}?`, 0, 1, 5000)).toMatchObject({ kind: 'served', procMs: 12 });
    } finally {
      proxy.close();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
