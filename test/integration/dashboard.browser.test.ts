/**
 * The dashboard in real Chromium (Debian's /usr/bin/chromium, `.ci/run` installs it; driven by
 * playwright-core) against a running `kais up` on the kais scenario (40 edge nodes, 5 agents,
 * every agent on lec so no model loads): the page loads with no console error, shows every node
 * and every agent, and after `kais scale` and `kais nodes --hold` the change and its event appear
 * without a reload; the throughput chart draws the simulator's prediction for the same requests
 * (the in-time rate of `kais up`'s prediction file, frame by frame on the wall clock) beside the
 * live rate. Screenshots go to a temporary folder, printed on stderr, which is removed when the test
 * passes (kept when it fails, for a look at the page; KAIS_SCREENSHOTS=<folder> keeps them there
 * either way). The orchestrator's log lines
 * are JSON (pino) and hold no token.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { predictedInTime, readPrediction } from '../../orchestrator/prediction';
import { readConfig, startOrchestrator } from '../../orchestrator/main';
import { CANARY_ADMIN, canarySetUp, playAgents } from '../support/canary-play';
import { perTestDir } from '../support/tmp';

const ROOT = path.resolve(__dirname, '..', '..');
const KAIS = path.join(ROOT, 'dist', 'kais.js');
const CHROMIUM = '/usr/bin/chromium';
const haveChromium = fs.existsSync(CHROMIUM);
if (!haveChromium) process.stderr.write(`dashboard browser test skipped: ${CHROMIUM} is missing (apt-get install chromium)\n`);

function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const c = spawn(process.execPath, [KAIS, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    c.stdout!.on('data', (b: Buffer) => (stdout += b.toString()));
    c.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
    c.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

let up: ChildProcess | null = null;
let browser: Browser | null = null;
const tmp = perTestDir('kais-dashboard-canary-');

afterEach(async () => {
  await browser?.close();
  browser = null;
  up?.kill('SIGKILL');
  up = null;
});

(haveChromium ? it : it.skip)(
  'kais up: the dashboard shows every node and agent, and a scale and a hold with their events, live',
  async () => {
    const keepIn = process.env.KAIS_SCREENSHOTS;
    if (keepIn) fs.mkdirSync(keepIn, { recursive: true });
    const shots = keepIn ?? fs.mkdtempSync(path.join(os.tmpdir(), 'kais-dashboard-'));
    process.stderr.write(`dashboard screenshots: ${shots}\n`);
    const child = spawn(
      process.execPath,
      [KAIS, 'up', '--scenario', 'kais', '--policy', 'lec', '--orchestration', 'static', '--duration', '60', '--verbose'],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    up = child;
    const lines: string[] = [];
    let partial = '';
    const waiters: { re: RegExp; resolve: (m: RegExpExecArray) => void }[] = [];
    child.stderr!.on('data', (c: Buffer) => {
      partial += c.toString();
      const got = partial.split('\n');
      partial = got.pop()!;
      for (const line of got) {
        lines.push(line);
        for (const w of waiters.slice()) {
          const m = w.re.exec(line);
          if (m) {
            waiters.splice(waiters.indexOf(w), 1);
            w.resolve(m);
          }
        }
      }
    });
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    const line = (re: RegExp) =>
      new Promise<RegExpExecArray>((resolve, reject) => {
        const seen = lines.map((l) => re.exec(l)).find((m) => m);
        if (seen) return resolve(seen);
        waiters.push({ re, resolve });
        void exited.then((code) => reject(new Error(`kais up exited (${code}) before ${re}: ${lines.slice(-5).join(' | ')}`)));
      });

    const [, evalPolicy, evalRate] = await line(/kais eval predicts (\S+): ([\d.]+) for these/);
    const [, url, tokenFile] = await line(/dashboard: (http:\S+) \(admin token: the first line of (\S+)\)/);
    await line(/5 agents up/);
    const token = fs.readFileSync(tokenFile, 'utf8').trim();
    const admin = ['--orchestrator', url.replace(/\/dashboard$/, ''), '--admin-token-file', tokenFile, '--json'];

    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-background-networking'] });
    const page = await browser.newPage({ viewport: { width: 1500, height: 1300 } });
    const problems: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') problems.push(`${m.type()}: ${m.text()}`);
    });
    page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
    page.on('requestfailed', (r) => problems.push(`request failed: ${r.url()}`));
    await page.goto(`${url}#token=${encodeURIComponent(token)}`);

    // every node and every agent, from the stream
    await page.waitForFunction(() => document.querySelectorAll('[data-node]').length === 40, undefined, { timeout: 15_000 });
    await page.waitForFunction(() => document.querySelectorAll('.agent[data-connected="true"]').length === 5, undefined, {
      timeout: 15_000,
    });
    expect(await page.locator('.agent').count()).toBe(5);
    expect(page.url()).not.toContain(token); // the fragment is dropped from the address bar
    const before = await page.evaluate(() => (window as unknown as { kaisDashboard: { snapshots: number } }).kaisDashboard.snapshots);

    // live throughput against the simulator's prediction: once the load runs, the chart's
    // simulator line holds the prediction file's in-time rate of each 2 s bucket (speed 1)
    type Chart = { series: { label?: string }[]; data: (number | null)[][] };
    type Dash = { kaisDashboard: { charts: { throughput: Chart }; prediction: { since: { liveInTime: number } | null } | null } };
    await page.waitForFunction(
      () => {
        const d = (window as unknown as Dash).kaisDashboard;
        return d.charts.throughput.data[3].some((v) => v !== null && v > 0) && (d.prediction?.since?.liveInTime ?? 0) > 0;
      },
      undefined,
      { timeout: 20_000 },
    );
    const prediction = readPrediction(path.join(path.dirname(tokenFile), 'prediction.json'));
    expect(prediction.policy).toBe(evalPolicy);
    expect(prediction.policy).toBe('lec/static');
    expect(prediction.throughputRate.toFixed(3)).toBe(evalRate);
    expect(prediction.startMs).not.toBeNull();
    const chart = await page.evaluate(() => {
      const u = (window as unknown as Dash).kaisDashboard.charts.throughput;
      return { labels: u.series.map((x) => x.label), data: u.data };
    });
    expect(chart.labels).toEqual(['Time', 'dispatched', 'in time', 'in time, simulator', 'forecast arrivals']);
    const points = chart.data[0].map((t, i) => [t, chart.data[3][i]] as const).filter(([, v]) => v !== null);
    expect(points.length).toBeGreaterThan(0);
    for (const [t, v] of points) {
      const expected = predictedInTime(prediction, 1, t! * 1000, t! * 1000 + 2000)!;
      expect({ t, v }).toEqual({ t, v: Math.round((expected / 2) * 100) / 100 });
    }
    const legend = await page.locator('#chart-throughput .u-legend').textContent();
    expect(legend).toContain('in time, simulator');
    expect(await page.locator('#prediction-state').textContent()).toMatch(
      /^simulator prediction \(lec\/static, the same requests\): throughput rate \d+% over the run; frame \d+ of \d+: [\d.]+ in time\/s .*; in time since \d\d:\d\d:\d\d: live \d+, predicted \d+ \(live \/ predicted \d\.\d\d\)$/,
    );
    await page.screenshot({ path: path.join(shots, '1-loaded.png'), fullPage: true });

    // kais scale: the services row and the event, without a reload
    const replicas = page.locator('#services tr[data-service="3"] td.replicas');
    const scaled = await cli(['scale', ...admin, '--service', '3', '--replicas', '6', '--reason', 'browser test', '--by', 'jest']);
    expect(scaled.code).toBe(0);
    await page.waitForFunction(() => document.querySelector('#services tr[data-service="3"] td.replicas')?.textContent === '6', undefined, {
      timeout: 10_000,
    });
    expect(await replicas.textContent()).toBe('6');
    await page.locator('#events li[data-kind="admin-scale"]', { hasText: 'browser test' }).waitFor({ timeout: 10_000 });
    expect(await page.locator('#services tr[data-service="3"] td.override').textContent()).toMatch(/6 in total by jest: browser test/);

    // kais nodes --hold: the node turns held, and the event shows
    const held = await cli(['nodes', ...admin, '--hold', '7', '--reason', 'disk check', '--by', 'jest']);
    expect(held.code).toBe(0);
    await page.locator('[data-node="7"][data-health="held"]').waitFor({ timeout: 10_000 });
    await page.locator('#events li[data-kind="admin-hold"]', { hasText: 'disk check' }).waitFor({ timeout: 10_000 });
    expect(await page.locator('[data-health="held"]').count()).toBe(1);
    const after = await page.evaluate(() => (window as unknown as { kaisDashboard: { snapshots: number } }).kaisDashboard.snapshots);
    expect(after).toBeGreaterThan(before); // the same page, updated by the stream
    const dom = await page.evaluate(() => document.getElementsByTagName('*').length);
    await page.screenshot({ path: path.join(shots, '2-scaled-and-held.png'), fullPage: true });
    process.stderr.write(`dashboard: ${dom} DOM elements\n`);

    // safe learning: kais up --policy lec runs no learner, gate or canary, and the panel says so
    expect(await page.locator('#safe-learning').textContent()).toMatch(/^off: no online learner, weight gate or canary/);

    expect(problems).toEqual([]);
    // a wrong token is refused by the stream
    const refused = await page.evaluate(
      async () => (await fetch('/dashboard/stream', { headers: { authorization: 'Bearer nope' } })).status,
    );
    expect(refused).toBe(401);

    child.kill('SIGINT');
    expect(await exited).toBe(130);
    // the orchestrator's forwarded lines: JSON logs never carry a token
    const orchestratorLines = lines.filter((l) => l.startsWith('[orchestrator] '));
    expect(orchestratorLines.length).toBeGreaterThan(0);
    expect(lines.some((l) => l.includes(token))).toBe(false);
    if (!keepIn) fs.rmSync(shots, { recursive: true, force: true });
  },
  90_000,
);

(haveChromium ? it : it.skip)(
  'a canary on the dashboard: the safe-learning panel and the canary eAP marked while it runs, then its verdict, live',
  async () => {
    // an in-process orchestrator on the small scenario with the canary on eAP 1 and the bad-weights
    // drill (test/support/canary-play.ts: the agents answer 30% in time under the drill's version, 80%
    // otherwise), windows of 10 s so the page is read well inside the first one (a verdict can come at its end)
    const canary = { eaps: [1], windowS: 10, maxWindows: 2, settleS: 0.2, baselineS: 2, minRequests: 200 };
    const { db, cfgFile, v1 } = canarySetUp(tmp.dir, { injectBadWeightsAfterS: 2.5, canary });
    const o = await startOrchestrator(readConfig(cfgFile), { dbPath: db, httpPort: 0, log: () => undefined });
    tmp.cleanups.push(() => o.close());
    await playAgents(o, (checksum) => checksum !== v1.checksum, tmp.cleanups);

    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-background-networking'] });
    const page = await browser.newPage({ viewport: { width: 1300, height: 1300 } });
    const problems: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') problems.push(`${m.type()}: ${m.text()}`);
    });
    page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
    await page.goto(`http://127.0.0.1:${o.httpPort!}/dashboard#token=${CANARY_ADMIN}`);

    // while it runs: the canary's line, each eAP's rate, the canary eAP's agent and nodes marked
    const running = page.locator('#safe-learning li.running');
    await running.waitFor({ timeout: 30_000 });
    expect(await running.textContent()).toMatch(/^canary: v2 on eAPs 1 since \S+, \d of 2 windows judged: /);
    await page
      .locator('#safe-learning li.sub', { hasText: /^per eAP, in time of requests: canary 1 0\.300 of \d+; control 0 0\.800 of \d+$/ })
      .waitFor({ timeout: 30_000 });
    expect(await page.locator('.agent[data-canary="true"]').evaluateAll((xs) => xs.map((x) => (x as HTMLElement).dataset.eap))).toEqual([
      '1',
    ]);
    expect(await page.locator('.eap.canary > .label').allTextContents()).toEqual(['eAP 1 · canary']);
    const keepIn = process.env.KAIS_SCREENSHOTS;
    if (keepIn) await page.screenshot({ path: path.join(keepIn, '3-canary.png'), fullPage: true });

    // the verdict: rolled back, the rejected version named, no eAP marked any more
    await page.locator('#safe-learning li.alert', { hasText: /^canary: last verdict: v2 rollback: / }).waitFor({ timeout: 60_000 });
    await page.locator('#safe-learning li.alert', { hasText: /^rejected: v2 \(canary\): / }).waitFor({ timeout: 10_000 });
    await page.waitForFunction(() => document.querySelectorAll('.agent[data-canary="true"]').length === 0, undefined, { timeout: 10_000 });
    expect(await page.locator('.eap.canary').count()).toBe(0);
    expect(await page.locator('#safe-learning').textContent()).toMatch(
      /canary: none running \(good version v\d+; 0 promoted, 1 rolled back/,
    );
    expect(problems).toEqual([]);
  },
  90_000,
);
