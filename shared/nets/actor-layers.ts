/**
 * The cMMAC actor (actor.ts) as a TensorFlow.js layers model, for people who load it with
 * `tf.loadLayersModel` (tf.io's `model.json` + weight files; docs/cmmac.md, "The actor in
 * TensorFlow.js layers format"). Built-in layers only, so no custom class needs registering:
 *
 *   observation [obsDim]
 *     -> dense_1 256 relu -> dense_2 128 relu -> dense_3 32 relu -> head_pre A linear        z [A]
 *   with the shared target scorer (when the weights hold it):
 *     observation -> reshape [obsDim, 1, 1] -> cropping2d (keeps the T target blocks)
 *       -> reshape [T, F] -> scorer_1 16 relu -> scorer_2 1 -> reshape [T]                   g [A]
 *     z = add(z, g)
 *   -> head softplus (or relu) -> scores: rescaling x * 1 + 1                               q [A]
 *
 * Output: the scores q >= 1 of ActorF32/ActorNet.scores, NOT probabilities and not masked. The
 * policy is pi_a = q_a m_a / sum_a' q_a' m_a' (masked.ts); equivalently log q are logits for a
 * masked softmax (invalid targets at -Infinity). Acting greedily: argmax of q over valid targets.
 *
 * Files (`writeActorLayers`): `model.json` (format 'layers-model', topology, weights manifest,
 * `userDefinedMetadata` saying what the model fits) and one shard `weights.bin` (float32, little
 * endian, in manifest order). `actorLayersFiles(dir)` is the IOHandler that reads them back in
 * pure tfjs (tfjs-node users can pass `file://<dir>/model.json` instead).
 */
import * as fs from 'fs';
import * as path from 'path';
import * as tf from '@tensorflow/tfjs';
import { UsageError } from '../errors';
import { AtomicWriteError, writeFilesAtomically } from '../atomic-write';
import { actorArrayCount, ACTOR_HIDDEN, TARGET_SCORER_HIDDEN, type HeadActivation, type TargetBlock } from './actor-f32';

export interface ActorLayersSpec {
  obsDim: number;
  numActions: number;
  head: HeadActivation;
  /** Where the per-target blocks sit (used when the weights hold the target scorer's 4 arrays). */
  targetBlock: TargetBlock | null;
  hidden?: readonly number[];
}

/** File names inside an export folder. */
export const LAYERS_MODEL_FILE = 'model.json';
export const LAYERS_WEIGHTS_FILE = 'weights.bin';

/**
 * A layers model computing the actor's scores q from weights [W1, b1, ..., Wh, bh] (kernels
 * [in, out]), optionally followed by the target scorer's [G1, g1, G2, g2]: the same function as
 * ActorF32 with the same arrays. The caller disposes the model.
 */
export function actorLayersModel(arrays: readonly Float32Array[], spec: ActorLayersSpec): tf.LayersModel {
  const hidden = spec.hidden ?? ACTOR_HIDDEN;
  const m = actorArrayCount(hidden);
  const withScorer = spec.targetBlock !== null && arrays.length === m + 4;
  if (arrays.length !== m && !withScorer)
    throw new TypeError(`actorLayersModel: expected ${m} weight arrays${spec.targetBlock ? ` or ${m + 4}` : ''}, got ${arrays.length}`);
  const { obsDim, numActions: A } = spec;
  const input = tf.input({ shape: [obsDim], name: 'observation' });
  let h: tf.SymbolicTensor = input;
  hidden.forEach((units, l) => {
    h = tf.layers.dense({ units, activation: 'relu', name: `dense_${l + 1}` }).apply(h) as tf.SymbolicTensor;
  });
  let z = tf.layers.dense({ units: A, name: 'head_pre' }).apply(h) as tf.SymbolicTensor;
  if (withScorer) {
    const { offset, stride, count } = spec.targetBlock!;
    if (count !== A || offset + stride * count > obsDim) throw new TypeError('actorLayersModel: target block does not fit the observation');
    let x = tf.layers.reshape({ targetShape: [obsDim, 1, 1], name: 'obs_column' }).apply(input) as tf.SymbolicTensor;
    x = tf.layers
      .cropping2D({
        cropping: [
          [offset, obsDim - offset - stride * count],
          [0, 0],
        ],
        name: 'target_blocks',
      })
      .apply(x) as tf.SymbolicTensor;
    x = tf.layers.reshape({ targetShape: [count, stride], name: 'per_target' }).apply(x) as tf.SymbolicTensor;
    x = tf.layers.dense({ units: TARGET_SCORER_HIDDEN, activation: 'relu', name: 'scorer_1' }).apply(x) as tf.SymbolicTensor;
    x = tf.layers.dense({ units: 1, name: 'scorer_2' }).apply(x) as tf.SymbolicTensor;
    const g = tf.layers.reshape({ targetShape: [count], name: 'scorer_out' }).apply(x) as tf.SymbolicTensor;
    z = tf.layers.add({ name: 'add_scorer' }).apply([z, g]) as tf.SymbolicTensor;
  }
  const act = tf.layers
    .activation({ activation: spec.head === 'softplus1' ? 'softplus' : 'relu', name: 'head' })
    .apply(z) as tf.SymbolicTensor;
  const q = tf.layers.rescaling({ scale: 1, offset: 1, name: 'scores' }).apply(act) as tf.SymbolicTensor;
  const model = tf.model({ inputs: input, outputs: q, name: 'kais_cmmac_actor' });
  // layer weights in model.weights order: each dense layer's [kernel, bias], layers in creation order
  const names = [...hidden.map((_, l) => `dense_${l + 1}`), 'head_pre', ...(withScorer ? ['scorer_1', 'scorer_2'] : [])];
  const tensors: tf.Tensor[] = [];
  names.forEach((name, l) => {
    const layer = model.getLayer(name);
    const [k, b] = layer.getWeights();
    tensors.push(tf.tensor(arrays[2 * l], k.shape), tf.tensor(arrays[2 * l + 1], b.shape));
    layer.setWeights(tensors.slice(-2));
  });
  tf.dispose(tensors);
  return model;
}

/** What the exported model fits and computes (`userDefinedMetadata` of model.json). */
export interface ActorLayersMeta {
  scenario: string;
  scenarioFingerprint: string;
  head: HeadActivation;
  obsDim: number;
  numActions: number;
  [key: string]: unknown;
}

/**
 * Refuses, with a UsageError naming it, a folder that cannot take a layers model: `dir` is not a
 * folder, or a folder (or anything but a file) is where model.json or weights.bin must go.
 * Writes nothing.
 */
export function checkLayersTarget(dir: string): void {
  const st = fs.statSync(dir, { throwIfNoEntry: false });
  if (!st) return; // writeActorLayers creates it
  if (!st.isDirectory()) throw new UsageError(`${dir}: exists and is not a folder`);
  for (const name of [LAYERS_MODEL_FILE, LAYERS_WEIGHTS_FILE]) {
    const file = path.join(dir, name);
    const f = fs.statSync(file, { throwIfNoEntry: false });
    if (f && !f.isFile())
      throw new UsageError(`${file}: is ${f.isDirectory() ? 'a folder' : 'not a regular file'}, expected the layers model's file ${name}`);
  }
}

/**
 * Writes `dir/model.json` + `dir/weights.bin` (the folder is created) for the actor of `arrays`.
 * Returns the paths written. The target is checked before anything is written (checkLayersTarget);
 * both files go to temporary files that are renamed into place only when both are written
 * (shared/atomic-write.ts), and a failure removes them (and the folders this call created). A file that cannot be
 * written is a UsageError naming it.
 */
export async function writeActorLayers(
  dir: string,
  arrays: readonly Float32Array[],
  spec: ActorLayersSpec,
  meta: ActorLayersMeta,
): Promise<string[]> {
  checkLayersTarget(dir);
  const model = actorLayersModel(arrays, spec);
  let created: string | undefined;
  let done = false;
  try {
    model.setUserDefinedMetadata({
      ...meta,
      output: 'scores q >= 1 per target, before masking (not probabilities): pi = q*mask / sum(q*mask); log q are masked-softmax logits',
      mask: `0/1 per target, also in the observation: target t's bit is observation[${spec.targetBlock ? `${spec.targetBlock.offset} + ${spec.targetBlock.stride} t` : 'W + 3 + 14 t'}] (1 = may be chosen; the cloud, the last target, always may)`,
    });
    created = asUsage(dir, 'cannot create', () => fs.mkdirSync(dir, { recursive: true }));
    const modelFile = path.join(dir, LAYERS_MODEL_FILE);
    const weightsFile = path.join(dir, LAYERS_WEIGHTS_FILE);
    await model.save(
      tf.io.withSaveHandler(async (artifacts) => {
        // the fields tf.io's own file and http savers write
        const json: tf.io.ModelJSON = {
          modelTopology: artifacts.modelTopology as object,
          format: artifacts.format,
          generatedBy: artifacts.generatedBy,
          convertedBy: artifacts.convertedBy ?? null,
          weightsManifest: [{ paths: [LAYERS_WEIGHTS_FILE], weights: artifacts.weightSpecs ?? [] }],
          ...(artifacts.userDefinedMetadata ? { userDefinedMetadata: artifacts.userDefinedMetadata } : {}),
        };
        const data = tf.io.CompositeArrayBuffer.join(artifacts.weightData as ArrayBuffer | ArrayBuffer[]);
        try {
          writeFilesAtomically([
            [weightsFile, Buffer.from(data)],
            [modelFile, `${JSON.stringify(json, null, 1)}\n`],
          ]);
        } catch (e) {
          if (e instanceof AtomicWriteError) throw new UsageError(`${e.file}: cannot write (${e.code})`);
          throw e;
        }
        return { modelArtifactsInfo: tf.io.getModelArtifactsInfoForJSON(artifacts) };
      }),
    );
    done = true;
    return [modelFile, weightsFile];
  } finally {
    model.dispose();
    if (!done) {
      // the folders this call created, deepest first, while empty
      if (created !== undefined) {
        for (let d = path.resolve(dir); ; d = path.dirname(d)) {
          try {
            fs.rmdirSync(d);
          } catch {
            break;
          }
          if (d === path.resolve(created)) break;
        }
      }
    }
  }
}

/** Runs a file operation on `file`; a file system error (with a code) becomes a UsageError naming `file`. */
function asUsage<T>(file: string, what: string, f: () => T): T {
  try {
    return f();
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (typeof code === 'string' && code.startsWith('E')) throw new UsageError(`${file}: ${what} (${code})`);
    throw e;
  }
}

/**
 * An IOHandler reading `<dir>/model.json` and the weight files its manifest names (paths relative
 * to the folder): `tf.loadLayersModel(actorLayersFiles(dir))` in pure tfjs.
 */
export function actorLayersFiles(dir: string): tf.io.IOHandler {
  return {
    load: async () => {
      const json = JSON.parse(fs.readFileSync(path.join(dir, LAYERS_MODEL_FILE), 'utf8')) as tf.io.ModelJSON;
      return tf.io.getModelArtifactsForJSON(json, async (manifest) => {
        const specs: tf.io.WeightsManifestEntry[] = [];
        const buffers: ArrayBuffer[] = [];
        for (const group of manifest) {
          specs.push(...group.weights);
          for (const p of group.paths) {
            const b = fs.readFileSync(path.join(dir, p));
            buffers.push(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer);
          }
        }
        return [specs, tf.io.CompositeArrayBuffer.join(buffers)];
      });
    },
  };
}
