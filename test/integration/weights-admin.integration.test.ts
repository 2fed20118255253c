/**
 * `kais weights` (orchestrator/weights-admin.ts through the admin API) against a live orchestrator:
 * real hub on loopback, SQLite store, the CLI as a child process, hand-driven agents that ack what
 * they apply (test/support/canary-play.ts). The tests wait for events, never for a duration.
 *
 * - A running canary (the bad-weights drill, windows long enough that no verdict comes first) is
 *   rolled back by the admin: every agent ends on the good version's weights as a new version, the
 *   event and the rejected version name who and why; then a rollback with no canary goes to the
 *   newest version never rejected, and a version not stored is one line naming --to (exit 2).
 * - Online learning frozen: kais status and kais weights say by whom, /metrics'
 *   kais_orchestrator_learning_frozen is 1; a restarted orchestrator on the same store is still
 *   frozen; unfrozen, the line goes and the gauge is 0.
 */
import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { readConfig, startOrchestrator } from '../../orchestrator/main';
import { unpackWeights } from '../../shared/protocol/weights';
import { CANARY_ADMIN, canarySetUp, playAgents } from '../support/canary-play';
import { until as waitUntil, httpGet as get } from '../support/wait';
import { parseMetrics, sample } from '../support/prometheus';
import { perTestDir } from '../support/tmp';

const KAIS = path.join(__dirname, '..', '..', 'dist', 'kais.js');
const tmp = perTestDir('kais-weights-admin-');
const until = (cond: () => boolean, what: string, ms = 60_000): Promise<void> => waitUntil(cond, what, ms);

/** One kais command to its end (a child process: the orchestrator answers from this one's event loop). */
function kais(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) =>
    execFile(
      process.execPath,
      [KAIS, ...args],
      { env: { ...process.env, KAIS_ADMIN_TOKEN: CANARY_ADMIN }, timeout: 30_000 },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    ),
  );
}

describe('kais weights against a live orchestrator', () => {
  it('rolls a running canary back, then the current version to the newest never rejected; a version not stored names --to', async () => {
    // windows of 60 s: the canary runs until the admin's rollback
    const canary = { share: 0.5, windowS: 60, maxWindows: 2, settleS: 0.2, baselineS: 2, minRequests: 200 };
    const { db, cfgFile, v1 } = canarySetUp(tmp.dir, { injectBadWeightsAfterS: 2.5, canary });
    const o = await startOrchestrator(readConfig(cfgFile), { dbPath: db, httpPort: 0, log: () => undefined });
    tmp.cleanups.push(() => o.close());
    const agents = await playAgents(o, (checksum) => checksum !== v1.checksum, tmp.cleanups);
    await until(() => o.canary!.running !== null, 'the canary start');
    await until(() => o.canary!.perEap().every((r) => r.requests > 0), 'counts from both eAPs');
    const url = `http://127.0.0.1:${o.httpPort!}`;

    const r = await kais(['weights', '--orchestrator', url, '--rollback', '--reason', 'late share up', '--by', 'jest']);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).toMatch(
      /^weights v2 rolled back after 0 window\(s\); every eAP gets v1's weights as v3: by jest: late share up \(per eAP, in time of requests: canary 0 0\.300 of \d+; control 1 0\.800 of \d+\)$/,
    );
    expect(lines[1]).toBe('weights v3');
    expect(r.stdout).toMatch(/^canary: none running \(good version v3; 0 promoted, 1 rolled back, 0 superseded\)$/m);
    expect(r.stdout).toMatch(/^rejected: v2 \(admin\): by jest: late share up$/m);
    await until(() => agents.every((a) => a.versions.includes(3)), 'every agent on v3');
    expect(unpackWeights(o.store.model(3)!)[0].data).toEqual(unpackWeights(v1)[0].data);
    expect(o.store.events({ kind: 'admin-rollback' }).map((e) => e.message)).toEqual([lines[0]]);
    expect(o.canary!.running).toBeNull();

    // no canary now: v3 back to the newest version never rejected below it, v1 (v2 was rolled back)
    const again = await kais(['weights', '--orchestrator', url, '--rollback', '--reason', 'drill', '--by', 'jest']);
    expect(again.code).toBe(0);
    expect(again.stdout.split('\n')[0]).toBe("jest: weights v3 rolled back: every eAP gets v1's weights as v4: drill");
    await until(() => agents.every((a) => a.versions.includes(4)), 'every agent on v4');
    // the versions it could name next, newest first, with who rejected them
    const t = '\\d\\d:\\d\\d:\\d\\d';
    expect(again.stdout).toMatch(
      new RegExp(
        `^stored \\(newest first, UTC\\): v4 ${t}, v3 ${t} \\(rejected by the admin\\), v2 ${t} \\(rejected by the admin\\), v1 ${t}$`,
        'm',
      ),
    );

    // a version not stored, the current one: one line naming --to, exit 2, nothing published
    const missing = await kais(['weights', '--orchestrator', url, '--rollback', '--to', '9', '--reason', 'x']);
    expect(missing).toMatchObject({ code: 2, stdout: '', stderr: 'kais: --to: v9 is not stored (stored: 1-4)\n' });
    const current = await kais(['weights', '--orchestrator', url, '--rollback', '--to', '4', '--reason', 'x']);
    expect(current.stderr).toBe('kais: --to: v4 is the current version (name an earlier one)\n');
    expect(o.store.latestModelVersion()).toBe(4);
  }, 90_000);

  it('freezes online learning, says so in kais status, stays frozen over a restart, and unfreezes', async () => {
    const { db, cfgFile } = canarySetUp(tmp.dir, { learner: 'cmmac', canary: null });
    const first = await startOrchestrator(readConfig(cfgFile), { dbPath: db, httpPort: 0, log: () => undefined });
    let url = `http://127.0.0.1:${first.httpPort!}`;
    const frozen = await kais(['weights', '--orchestrator', url, '--freeze', '--reason', 'peak hours', '--by', 'jest']);
    expect(frozen.code).toBe(0);
    expect(frozen.stdout).toMatch(/^jest: online learning frozen \(no update, no new version until unfrozen\): peak hours\nweights v1\n/);
    expect(frozen.stdout).toMatch(/^learner: frozen by jest since \S+: peak hours \(kais weights --unfreeze\)$/m);
    expect(first.learner!.isFrozen).toBe(true);
    const frozenGauge = async (port: number) =>
      sample(parseMetrics((await get(port, '/metrics')).text), 'kais_orchestrator_learning_frozen');
    expect(await frozenGauge(first.httpPort!)).toBe(1);
    const twice = await kais(['weights', '--orchestrator', url, '--freeze', '--reason', 'again']);
    expect(twice).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/^kais: learning is frozen already \(by jest since \S+: peak hours\)\n$/),
    });
    await first.close();

    // the same store, a new orchestrator: still frozen, and kais status says by whom
    const logs: string[] = [];
    const second = await startOrchestrator(readConfig(cfgFile), { dbPath: db, httpPort: 0, log: (l) => logs.push(l) });
    tmp.cleanups.push(() => second.close());
    url = `http://127.0.0.1:${second.httpPort!}`;
    expect(second.learner!.isFrozen).toBe(true);
    expect(logs.some((l) => /^learner: frozen by jest since \S+: peak hours \(kais weights --unfreeze to learn again\)$/.test(l))).toBe(
      true,
    );
    const status = await kais(['status', '--orchestrator', url]);
    expect(status.stdout).toMatch(/^learner: frozen by jest since \S+: peak hours \(kais weights --unfreeze\)$/m);
    const thawed = await kais(['weights', '--orchestrator', url, '--unfreeze', '--reason', 'peak over', '--by', 'jest']);
    expect(thawed.code).toBe(0);
    expect(thawed.stdout.split('\n')[0]).toBe("jest: online learning on again, from weights v1's decisions: peak over");
    expect(thawed.stdout).not.toMatch(/frozen/);
    expect(second.learner!.isFrozen).toBe(false);
    expect(await frozenGauge(second.httpPort!)).toBe(0);
    expect(second.store.events({ kind: 'admin-freeze' })).toHaveLength(1);
    expect(second.store.events({ kind: 'admin-unfreeze' })).toHaveLength(1);
  }, 90_000);
});
