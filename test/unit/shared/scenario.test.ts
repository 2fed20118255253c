/**
 * Scenario files (`--scenario file.json`): every field is validated, and a scenario too big or
 * contradictory to run is refused with a UsageError naming the file and the field, never run
 * (it overflowed Int32 counters, ran out of memory, ran forever, or silently ignored a typo).
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { UsageError } from '../../../shared/errors';
import {
  BUILT_IN_SCENARIOS,
  checkLoad,
  SCENARIO_LIMITS,
  loadScenario,
  scenarioWithSlot,
  topologyOf,
  validateScenario,
} from '../../../shared/scenario';
import TINY_RAW from '../../../shared/scenarios/tiny.json';

type Raw = Record<string, unknown>;
/** A deep copy of tiny.json, changed by `edit`. */
function tiny(edit: (r: Raw & typeof TINY_RAW) => void = () => undefined): Raw {
  const r = JSON.parse(JSON.stringify(TINY_RAW)) as Raw & typeof TINY_RAW;
  edit(r);
  return r;
}
/** The UsageError line validateScenario throws for `raw` (fails the test if it accepts it). */
function refusal(raw: unknown): string {
  try {
    validateScenario(raw, 'f.json');
  } catch (e) {
    expect(e).toBeInstanceOf(UsageError);
    const m = (e as Error).message;
    expect(m.split('\n')).toHaveLength(1);
    return m;
  }
  throw new Error('accepted');
}
/** `eaps` eAPs of `perEap` 2-core nodes and `services` 0.5-core services. */
function sized(eaps: number, perEap: number, services: number): Raw {
  return tiny((r) => {
    r.eaps = Array.from({ length: eaps }, () => ({ nodes: Array.from({ length: perEap }, () => ({ cpuCores: 2, memGB: 4 })) }));
    r.services = Array.from({ length: services }, () => ({ cpuCores: 0.5, memGB: 0.25, weight: 1, workScale: 1 }));
    r.maxReplicasPerService = 1e6;
  });
}

describe('built-in scenarios', () => {
  it.each(BUILT_IN_SCENARIOS)('%s loads and is within every limit', (name) => {
    const s = loadScenario(name);
    expect(s.name).toBe(name);
    // and stays valid when validated again (other modules validate edited copies)
    expect(validateScenario(JSON.parse(JSON.stringify(s)), name)).toEqual(s);
  });
  it('the shipped files are the built-ins', () => {
    const files = fs.readdirSync(path.resolve(__dirname, '../../../shared/scenarios')).filter((f) => f.endsWith('.json'));
    expect(files.map((f) => f.replace(/\.json$/, '')).sort()).toEqual([...BUILT_IN_SCENARIOS].sort());
  });
});

describe('cloud and node capacity: replica counts fit Int32 counters', () => {
  it.each([
    [
      'cloud.vcpuPerVm',
      (r: Raw & typeof TINY_RAW) => (r.cloud.vcpuPerVm = 2e9),
      /field "cloud\.vcpuPerVm" must be in \[0\.01, 1024\], got 2000000000/,
    ],
    ['cloud.vms', (r: Raw & typeof TINY_RAW) => (r.cloud.vms = 1e6), /field "cloud\.vms" must be in \[1, 100000\]/],
    [
      'cloud.memGBPerVm',
      (r: Raw & typeof TINY_RAW) => (r.cloud.memGBPerVm = 1e12),
      /field "cloud\.memGBPerVm" must be in \[0\.01, 65536\]/,
    ],
    [
      'vms x vcpuPerVm',
      (r: Raw & typeof TINY_RAW) => Object.assign(r.cloud, { vms: 100_000, vcpuPerVm: 1024 }),
      /field "cloud" vms x vcpuPerVm = 100000 x 1024 = 102,400,000 vCPUs, more than 1,000,000/,
    ],
    [
      'node cpuCores',
      (r: Raw & typeof TINY_RAW) => (r.eaps[0].nodes[1].cpuCores = 1e9),
      /field "eaps\[0\]\.nodes\[1\]\.cpuCores" must be in \[0\.01, 1024\]/,
    ],
  ])('%s', (_name, edit, message) => {
    expect(refusal(tiny(edit))).toMatch(message);
  });
  it('at the limit, the most replicas of a service one target holds stays far below 2^31', () => {
    const s = validateScenario(
      tiny((r) => {
        Object.assign(r.cloud, { vms: 1000, vcpuPerVm: 1000, memGBPerVm: 65536 });
        r.services[0].cpuCores = 0.01;
      }),
      'f.json',
    );
    expect(s.cloud.vms * s.cloud.vcpuPerVm).toBe(SCENARIO_LIMITS.cloudVcpus);
    expect((SCENARIO_LIMITS.cloudVcpus / 0.01) * 10).toBeLessThan(2 ** 31);
    expect((1024 / 0.01) * 10).toBeLessThan(2 ** 31); // a node: cpuCores <= 1024, a service >= 0.01 cores
  });
});

describe('topology size', () => {
  it('eAPs: at most 1000', () => {
    expect(refusal(sized(1001, 1, 4))).toMatch(/^f\.json: field "eaps" has 1,001 eAPs, more than the 1,000 a scenario may have$/);
    expect(topologyOf(validateScenario(sized(1000, 1, 4), 'f.json')).numEaps).toBe(1000);
  });
  it('edge nodes: at most 5000 in all, and in one eAP', () => {
    expect(refusal(sized(10, 501, 4))).toMatch(
      /^f\.json: field "eaps" holds more than 5,000 edge nodes in all \(the most a scenario may have\), past eaps\[9\]$/,
    );
    expect(refusal(sized(1, 5001, 4))).toMatch(/field "eaps\[0\]\.nodes" has 5,001 nodes, more than the 5,000/);
    expect(topologyOf(validateScenario(sized(10, 500, 4), 'f.json')).numNodes).toBe(5000);
  });
  it('services: at most 1000, and nodes x services at most 200,000', () => {
    expect(refusal(sized(1, 1, 1001))).toMatch(/field "services" has 1,001 services, more than the 1,000/);
    expect(refusal(sized(1, 201, 1000))).toMatch(
      /field "services" 1000 services on 201 edge nodes make 201,000 \(node, service\) pairs, more than 200,000/,
    );
    expect(validateScenario(sized(1, 200, 1000), 'f.json').services).toHaveLength(1000);
  });
  it('eAPs x nodes x services at most 20,000,000', () => {
    expect(refusal(sized(1000, 1, 21))).toMatch(
      /field "eaps" 1000 eAPs x 1000 edge nodes x 21 services is 21,000,000, more than 20,000,000/,
    );
    expect(validateScenario(sized(1000, 1, 20), 'f.json').eaps).toHaveLength(1000);
  });
  it('initial replicas: at most 1,000,000 in all', () => {
    const raw = sized(1000, 1, 20);
    Object.assign(raw, { initialReplicasPerEap: 51, maxReplicasPerService: 1e6 });
    expect(refusal(raw)).toMatch(
      /field "initialReplicasPerEap" 51 x 1000 eAPs x 20 services = 1,020,000 replicas at t = 0, more than 1,000,000/,
    );
  });
});

describe('frame length', () => {
  it('expected requests per frame at most 5,000,000 (a 3600 s x 1e6-slot frame ran forever)', () => {
    const raw = tiny((r) => Object.assign(r, { slotS: 3600, slotsPerFrame: 1_000_000, workload: { ...r.workload, ratePerS: 1 } }));
    expect(refusal(raw)).toMatch(
      /^f\.json: field "workload\.ratePerS" makes 1 requests\/s x 3600 s slots x 1000000 slots = 3,600,000,000 requests per frame at load 1, more than 5,000,000/,
    );
    expect(
      validateScenario(
        tiny((r) => Object.assign(r, { slotS: 5, slotsPerFrame: 1000, workload: { ...r.workload, ratePerS: 1000 } })),
        'f',
      ).slotS,
    ).toBe(5);
  });
  it('slots x (nodes + 1) x (eAPs + services) per frame at most 5,000,000,000', () => {
    const raw = sized(10, 100, 100);
    Object.assign(raw, { slotS: 0.001, slotsPerFrame: 50_000 });
    expect(refusal(raw)).toMatch(
      /^f\.json: field "slotsPerFrame" 50000 slots x \(1000 edge nodes \+ 1\) x \(10 eAPs \+ 100 services\) = 5,505,500,000 per frame, more than 5,000,000,000/,
    );
    Object.assign(raw, { slotsPerFrame: 45_000 });
    expect(validateScenario(raw, 'f').slotsPerFrame).toBe(45_000);
  });
  it('--slot cannot split a frame past the same limit', () => {
    const s = validateScenario(sized(10, 100, 100), 'big'); // a 25 s frame
    expect(() => scenarioWithSlot(s, 0.0005)).toThrow(
      /^--slot: 0\.0005 s makes 50000 slots a frame of scenario tiny, .* more than 5,000,000,000$/,
    );
    expect(scenarioWithSlot(s, 0.001).slotsPerFrame).toBe(25_000);
  });
});

describe('unknown nested fields are refused, naming the path and the known fields', () => {
  it.each([
    [
      'services[0].weigth',
      (r: Raw & typeof TINY_RAW) => Object.assign(r.services[0], { weigth: 100 }),
      'cpuCores, memGB, weight, workScale',
    ],
    ['eaps[0].node', (r: Raw & typeof TINY_RAW) => Object.assign(r.eaps[0], { node: [] }), 'nodes'],
    ['eaps[0].nodes[2].gpus', (r: Raw & typeof TINY_RAW) => Object.assign(r.eaps[0].nodes[2], { gpus: 1 }), 'cpuCores, memGB'],
    ['cloud.vm', (r: Raw & typeof TINY_RAW) => Object.assign(r.cloud, { vm: 3 }), 'vms, vcpuPerVm, memGBPerVm'],
    [
      'network.eapToCloud',
      (r: Raw & typeof TINY_RAW) => Object.assign(r.network, { eapToCloud: {} }),
      'deviceToEap, eapToOwnNode, eapToOtherNode, edgeToCloud',
    ],
    ['network.edgeToCloud.latency', (r: Raw & typeof TINY_RAW) => Object.assign(r.network.edgeToCloud, { latency: 5 }), 'latencyMs, mbps'],
    [
      'workload.rate',
      (r: Raw & typeof TINY_RAW) => Object.assign(r.workload, { rate: 5 }),
      'ratePerS, inputMB, deadlineBaseS, deadlineSlack',
    ],
    ['color', (r: Raw & typeof TINY_RAW) => Object.assign(r, { color: 'blue' }), 'name, description, slotS'],
  ])('%s', (at, edit, known) => {
    expect(refusal(tiny(edit))).toContain(`f.json: field "${at}" is not a known field (known: ${known}`);
  });
  it('a key with control characters is printed escaped', () => {
    expect(refusal(tiny((r) => Object.assign(r.cloud, { '\u001b[31mred': 1 })))).toContain('field "cloud.\\u001b[31mred"');
  });
});

describe('contradictions and degenerate values', () => {
  it('initial replicas above maxReplicasPerService are refused', () => {
    expect(refusal(tiny((r) => Object.assign(r, { initialReplicasPerEap: 2, maxReplicasPerService: 1 })))).toMatch(
      /field "initialReplicasPerEap" 2 x 1 eAPs = 2 initial replicas of each service, more than maxReplicasPerService \(1\)/,
    );
    // the initial placement puts that many on every eAP
    const two = tiny((r) => Object.assign(r, { eaps: [r.eaps[0], r.eaps[0]], initialReplicasPerEap: 2, maxReplicasPerService: 3 }));
    expect(refusal(two)).toMatch(/2 x 2 eAPs = 4 initial replicas of each service, more than maxReplicasPerService \(3\)/);
    expect(
      validateScenario(
        tiny((r) => Object.assign(r, { initialReplicasPerEap: 2, maxReplicasPerService: 2 })),
        'f',
      ).initialReplicasPerEap,
    ).toBe(2);
  });
  it('workload.ratePerS must be at least 1e-6 (0, or so small that the generator never ended)', () => {
    expect(refusal(tiny((r) => (r.workload.ratePerS = 0)))).toMatch(/^f\.json: field "workload\.ratePerS" must be at least 0\.000001/);
    expect(refusal(tiny((r) => (r.workload.ratePerS = 1e-307)))).toMatch(
      /must be at least 0\.000001 \(requests\/s at load 1\), got 1e-307$/,
    );
  });
  it.each([
    [1e308, /field "services\[0\]\.weight" must be in \[0, 1000000\], got 1e\+308/],
    [5e-324, /field "services\[0\]\.weight" must be 0 or in \[0\.000001, 1000000\], got 5e-324/],
    [1e-7, /field "services\[0\]\.weight" must be 0 or in/],
    [-1, /field "services\[0\]\.weight" must be in \[0, 1000000\], got -1/],
  ])('a service weight of %s is refused', (weight, message) => {
    expect(refusal(tiny((r) => (r.services[0].weight = weight)))).toMatch(message);
  });
  it('weights: 0 and 1e6 are fine, all 0 is not', () => {
    const ok = tiny((r) => {
      r.services[0].weight = 1e6;
      r.services[1].weight = 0;
    });
    expect(validateScenario(ok, 'f').services.map((x) => x.weight)).toEqual([1e6, 0, 0.577, 0.5]);
    expect(refusal(tiny((r) => r.services.forEach((x) => (x.weight = 0))))).toMatch(/field "services" all have weight 0/);
  });
});

describe('the file itself', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-scenario-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
  it('a UTF-8 byte order mark is skipped', () => {
    const file = path.join(dir, 'bom.json');
    fs.writeFileSync(file, '\uFEFF' + JSON.stringify(TINY_RAW));
    expect(loadScenario(file).services).toHaveLength(4);
  });
  it('a name with control characters is refused, escaped', () => {
    for (const name of ['\u001b[2Jx', 'a\nb', 'a\u009bb']) {
      const m = refusal(tiny((r) => (r.name = name)));
      expect(m).toMatch(/^f\.json: field "name" must not contain control characters, got "/);
      expect(m).not.toMatch(/[\u0000-\u001f\u007f-\u009f]/); // eslint-disable-line no-control-regex
    }
  });
  it('a JSON error quoting control characters prints them escaped', () => {
    const file = path.join(dir, 'esc.json');
    fs.writeFileSync(file, '{"name": x\u001b[2J}'); // Node's message quotes the text
    expect(() => loadScenario(file)).toThrow(UsageError);
    expect(() => loadScenario(file)).not.toThrow(/[\u0000-\u001f]/); // eslint-disable-line no-control-regex
  });
  it('the adversarial nested typo (weigth) is refused where the intended file loads', () => {
    const file = path.join(dir, 'typo.json');
    fs.writeFileSync(file, JSON.stringify(tiny((r) => Object.assign(r.services[0], { weigth: 100, weight: undefined }))));
    expect(() => loadScenario(file)).toThrow(/typo\.json: field "services\[0\]\.weigth" is not a known field/);
    const intended = path.join(dir, 'intended.json');
    fs.writeFileSync(intended, JSON.stringify(tiny((r) => (r.services[0].weight = 100))));
    expect(loadScenario(intended).services[0].weight).toBe(100);
  });
});

describe('checkLoad: --load times the scenario rate is held to the per-frame request limit too', () => {
  const kais = loadScenario('kais');
  const fast = { ...kais, workload: { ...kais.workload, ratePerS: 100_000 } }; // 2.5 M requests a 25 s frame
  it('accepts the built-ins at --load 100 and a fast scenario at load 2', () => {
    for (const name of ['tiny', 'small', 'kais', 'large']) expect(() => checkLoad(loadScenario(name), 100)).not.toThrow();
    expect(() => checkLoad(fast, 2)).not.toThrow();
  });
  it('refuses a load that takes it past the limit, naming the flag', () => {
    expect(() => checkLoad(fast, 3)).toThrow(UsageError);
    expect(() => checkLoad(fast, 3)).toThrow(/^--load: 3 x scenario kais's 2,500,000 requests per frame = 7,500,000, more than 5,000,000$/);
    expect(() => checkLoad(fast, 3, 'lesson field "load"')).toThrow(/^lesson field "load": 3 x/);
  });
});
