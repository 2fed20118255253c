/**
 * A GPG model as text (JSON): the net's configuration, the number of services it was made for,
 * and its weights (little-endian float32, base64, in variable order). Pure: the callers read and
 * write the files (kais eval, the training script, the orchestrator).
 */
import { DEFAULT_GPG_NET, GpgNet, type GpgNetConfig } from './gnn';

export const GPG_MODEL_FORMAT = 'kais-gpg-v1';

export interface GpgModelMeta {
  /** Scenario the model was trained on (informational; the fit check is by number of services). */
  scenario: string;
  /** What made it (command line, updates, seeds), for the reader. */
  trainedWith?: Record<string, unknown>;
  /**
   * H, the nodes it changes per frame, when the model has its own budget: trained with another than
   * its scenario's `scaleNodesPerFrame` (which applies when this is absent), or raised after training
   * (the shipped kais model: trained at 2, run at 6, chosen on validation seeds; docs/gpg.md).
   */
  nodesPerFrame?: number;
  /**
   * hpa's scale-in after GPG's orders at each decision (shared/orchestration/scale-in.ts), with
   * this target utilisation; absent: GPG alone. A run-time setting of the model like nodesPerFrame,
   * chosen on validation seeds (docs/gpg.md, session 29).
   */
  scaleIn?: GpgScaleIn;
}

export interface GpgScaleIn {
  rule: 'hpa';
  /** hpa's target utilisation for the scale-in (hpa alone: 0.7). */
  targetUtilisation: number;
  /** Never remove the last replica of a service on an eAP. @defaultValue false */
  keepPerEap?: boolean;
  /** Remove none of a service whose failed share over the window is above this. @defaultValue 1 */
  maxFailedShare?: number;
  /** Undo a removal after which the service's failed share rose by more than this (shared/orchestration/scale-in.ts). @defaultValue 1 */
  regret?: number;
  /**
   * A leaner scale-in in windows whose failed share is below belowFailedShare (shared/orchestration/scale-in.ts);
   * with `actor`, the actor switch as well: the file (in the model's folder) of the light-load actor
   * the agents dispatch with in the frame after a light window (and before the first decision), the
   * main actor after any other. @defaultValue none
   */
  light?: { belowFailedShare: number; targetUtilisation: number; keepPerEap: boolean; maxFailedShare?: number; actor?: string };
}

interface GpgModelJson extends GpgModelMeta {
  format: string;
  numServices: number;
  config: GpgNetConfig;
  shapes: number[][];
  weights: string;
}

/** The H a model runs at: its own `nodesPerFrame`, else its scenario's `scaleNodesPerFrame`. */
export function modelNodesPerFrame(meta: GpgModelMeta, scenario: { scaleNodesPerFrame: number }): number {
  return meta.nodesPerFrame ?? scenario.scaleNodesPerFrame;
}

/** The `nodesPerFrame` field a model written with budget h records: none when h is its scenario's. */
export function nodesPerFrameField(h: number, scenario: { scaleNodesPerFrame: number }): Pick<GpgModelMeta, 'nodesPerFrame'> {
  return h !== scenario.scaleNodesPerFrame ? { nodesPerFrame: h } : {};
}

/**
 * Every training update a model has seen: its own run's (`trainedWith.updates`) plus those of the
 * model it was fine-tuned from (`trainedWith.initUpdates`, itself written as that model's total), so
 * a fine-tune of a fine-tune continues the entropy schedule where the chain ended.
 */
export function updatesSeen(meta: GpgModelMeta): number {
  const tw = meta.trainedWith ?? {};
  const n = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : 0);
  return n(tw.updates) + n(tw.initUpdates);
}

export function gpgModelToJson(net: GpgNet, meta: GpgModelMeta): string {
  const arrays = net.getWeights();
  const total = arrays.reduce((s, a) => s + a.length, 0);
  const buf = Buffer.alloc(total * 4);
  let o = 0;
  for (const a of arrays) for (let i = 0; i < a.length; i++, o += 4) buf.writeFloatLE(a[i], o);
  const out: GpgModelJson = {
    format: GPG_MODEL_FORMAT,
    ...meta,
    numServices: net.numServices,
    config: net.config,
    shapes: net.shapes,
    weights: buf.toString('base64'),
  };
  return JSON.stringify(out) + '\n';
}

/** The fields a model file may hold (gpgModelToJson writes them); any other is refused. */
const MODEL_FIELDS: readonly string[] = [
  'format',
  'scenario',
  'trainedWith',
  'nodesPerFrame',
  'scaleIn',
  'numServices',
  'config',
  'shapes',
  'weights',
];

/**
 * Bounds of a model's `config` (the net is built from it before its weights are read, so an absurd
 * value would hang or exhaust memory: 1e9 message-passing rounds run on every decision, layers of
 * 1e5 units ask for 4e10 bytes). Every model made so far is E 16, 2 rounds, 64-32 / 128-64-32
 * (DEFAULT_GPG_NET); the bounds leave room for nets several times larger while keeping the largest
 * net they allow near 60 MB of weights.
 */
export const GPG_CONFIG_LIMITS = { embed: 256, rounds: 8, layers: 6, width: 512 } as const;

/** A model's `config` checked field by field (absent fields: DEFAULT_GPG_NET's); a TypeError naming the field otherwise. */
export function gpgNetConfigOf(v: unknown): GpgNetConfig {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new TypeError(`config must be an object, got ${JSON.stringify(v)}`);
  const c = v as Record<string, unknown>;
  const known = Object.keys(DEFAULT_GPG_NET);
  for (const k of Object.keys(c)) if (!known.includes(k)) throw new TypeError(`config: unknown field "${k}" (fields: ${known.join(', ')})`);
  const int = (name: string, x: unknown, max: number): number => {
    if (typeof x !== 'number' || !Number.isInteger(x) || x < 1 || x > max)
      throw new TypeError(`${name} must be an integer in 1..${max}, got ${JSON.stringify(x) ?? String(x)}`);
    return x;
  };
  const layers = (name: 'hidden' | 'headHidden'): number[] => {
    const x = c[name];
    if (x === undefined) return [...DEFAULT_GPG_NET[name]];
    if (!Array.isArray(x) || x.length > GPG_CONFIG_LIMITS.layers)
      throw new TypeError(`config.${name} must be a list of at most ${GPG_CONFIG_LIMITS.layers} layer widths, got ${JSON.stringify(x)}`);
    return x.map((w, i) => int(`config.${name}[${i}]`, w, GPG_CONFIG_LIMITS.width));
  };
  const encoder = c.encoder ?? DEFAULT_GPG_NET.encoder;
  if (encoder !== 'gnn' && encoder !== 'stack')
    throw new TypeError(`config.encoder must be "gnn" or "stack", got ${JSON.stringify(encoder)}`);
  return {
    encoder,
    embed: c.embed === undefined ? DEFAULT_GPG_NET.embed : int('config.embed', c.embed, GPG_CONFIG_LIMITS.embed),
    rounds: c.rounds === undefined ? DEFAULT_GPG_NET.rounds : int('config.rounds', c.rounds, GPG_CONFIG_LIMITS.rounds),
    hidden: layers('hidden'),
    headHidden: layers('headHidden'),
  };
}

/** The net of a model's text; a TypeError naming the problem when it is not one, or not for numServices. */
export function gpgModelFromJson(text: string, numServices: number): { net: GpgNet; meta: GpgModelMeta } {
  let m: GpgModelJson;
  try {
    m = JSON.parse(text) as GpgModelJson;
  } catch (e) {
    throw new TypeError(`not JSON (${(e as Error).message})`, { cause: e });
  }
  if (typeof m !== 'object' || m === null || m.format !== GPG_MODEL_FORMAT)
    throw new TypeError(`not a GPG model (format must be "${GPG_MODEL_FORMAT}")`);
  for (const k of Object.keys(m))
    if (!MODEL_FIELDS.includes(k)) throw new TypeError(`unknown field "${k}" (fields: ${MODEL_FIELDS.join(', ')})`);
  if (m.numServices !== numServices) throw new TypeError(`made for ${m.numServices} services, the scenario has ${numServices}`);
  if (typeof m.weights !== 'string' || !Array.isArray(m.shapes)) throw new TypeError('weights or shapes missing');
  if (m.nodesPerFrame !== undefined && !(Number.isInteger(m.nodesPerFrame) && m.nodesPerFrame >= 1))
    throw new TypeError(`nodesPerFrame must be a whole number >= 1, got ${JSON.stringify(m.nodesPerFrame)}`);
  const scaleIn = m.scaleIn === undefined ? undefined : scaleInOf(m.scaleIn);
  const net = new GpgNet(numServices, 1, gpgNetConfigOf(m.config));
  try {
    const buf = Buffer.from(m.weights, 'base64');
    const want = net.shapes;
    if (JSON.stringify(want) !== JSON.stringify(m.shapes))
      throw new TypeError(`its shapes do not match its config (${JSON.stringify(m.shapes).slice(0, 80)})`);
    const total = want.reduce((s, sh) => s + sh.reduce((p, d) => p * d, 1), 0);
    if (buf.length !== total * 4) throw new TypeError(`holds ${buf.length} weight bytes, the net needs ${total * 4}`);
    let o = 0;
    const arrays = want.map((sh) => {
      const a = new Float32Array(sh.reduce((p, d) => p * d, 1));
      for (let i = 0; i < a.length; i++, o += 4) a[i] = buf.readFloatLE(o);
      if (!a.every(Number.isFinite)) throw new TypeError('holds a weight that is not a finite number');
      return a;
    });
    net.setWeights(arrays);
  } catch (e) {
    net.dispose();
    throw e;
  }
  return {
    net,
    meta: {
      scenario: String(m.scenario),
      trainedWith: m.trainedWith,
      ...(m.nodesPerFrame !== undefined ? { nodesPerFrame: m.nodesPerFrame } : {}),
      ...(scaleIn ? { scaleIn } : {}),
    },
  };
}

/** A model's `scaleIn` field checked; a TypeError naming the problem otherwise. */
function scaleInOf(v: unknown): GpgScaleIn {
  const o = v as Partial<GpgScaleIn> | null;
  if (typeof o !== 'object' || o === null || o.rule !== 'hpa')
    throw new TypeError(
      `scaleIn must be {"rule": "hpa", "targetUtilisation": <0..1>, "keepPerEap"?: <bool>, "maxFailedShare"?: <0..1>, "regret"?: <0..1>, "light"?: {"belowFailedShare": <0..1>, "targetUtilisation": <0..1>, "keepPerEap": <bool>, "maxFailedShare"?: <0..1>, "actor"?: "<file>.bin"}}, got ${JSON.stringify(v)}`,
    );
  const t = o.targetUtilisation;
  if (typeof t !== 'number' || !(t > 0 && t <= 1))
    throw new TypeError(`scaleIn.targetUtilisation must be a number in (0, 1], got ${JSON.stringify(t)}`);
  if (o.keepPerEap !== undefined && typeof o.keepPerEap !== 'boolean')
    throw new TypeError(`scaleIn.keepPerEap must be true or false, got ${JSON.stringify(o.keepPerEap)}`);
  const f = o.maxFailedShare;
  if (f !== undefined && (typeof f !== 'number' || !(f >= 0 && f <= 1)))
    throw new TypeError(`scaleIn.maxFailedShare must be a number in [0, 1], got ${JSON.stringify(f)}`);
  const r = o.regret;
  if (r !== undefined && (typeof r !== 'number' || !(r >= 0 && r <= 1)))
    throw new TypeError(`scaleIn.regret must be a number in [0, 1], got ${JSON.stringify(r)}`);
  const l = o.light as Partial<NonNullable<GpgScaleIn['light']>> | undefined;
  if (
    l !== undefined &&
    (typeof l !== 'object' ||
      l === null ||
      typeof l.belowFailedShare !== 'number' ||
      !(l.belowFailedShare >= 0 && l.belowFailedShare <= 1) ||
      typeof l.targetUtilisation !== 'number' ||
      !(l.targetUtilisation > 0 && l.targetUtilisation <= 1) ||
      typeof l.keepPerEap !== 'boolean' ||
      (l.maxFailedShare !== undefined && (typeof l.maxFailedShare !== 'number' || !(l.maxFailedShare >= 0 && l.maxFailedShare <= 1))))
  )
    throw new TypeError(
      `scaleIn.light must be {"belowFailedShare": <0..1>, "targetUtilisation": <0..1>, "keepPerEap": <bool>, "maxFailedShare"?: <0..1>, "actor"?: "<file>.bin"}, got ${JSON.stringify(l)}`,
    );
  // a file name in the model's folder, no path: a model file cannot point anywhere else on the machine
  if (l?.actor !== undefined && (typeof l.actor !== 'string' || !/^[A-Za-z0-9._-]+\.bin$/.test(l.actor) || l.actor.startsWith('.')))
    throw new TypeError(
      `scaleIn.light.actor must be the file name of an actor (.bin) in the model's folder, got ${JSON.stringify(l.actor)}`,
    );
  return {
    rule: 'hpa',
    targetUtilisation: t,
    ...(l !== undefined
      ? {
          light: {
            belowFailedShare: l.belowFailedShare!,
            targetUtilisation: l.targetUtilisation!,
            keepPerEap: l.keepPerEap!,
            ...(l.maxFailedShare !== undefined ? { maxFailedShare: l.maxFailedShare } : {}),
            ...(l.actor !== undefined ? { actor: l.actor } : {}),
          },
        }
      : {}),
    ...(o.keepPerEap !== undefined ? { keepPerEap: o.keepPerEap } : {}),
    ...(f !== undefined ? { maxFailedShare: f } : {}),
    ...(r !== undefined ? { regret: r } : {}),
  };
}
