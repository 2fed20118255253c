/**
 * `kais export`: the actor of a checkpoint (an exported actor `.bin` + `.json`, or a `kais train`
 * database: the checkpoint `kais eval --checkpoint` uses) in TensorFlow.js layers format
 * (`<dir>/model.json` + `<dir>/weights.bin`, loadable with `tf.loadLayersModel`;
 * shared/nets/actor-layers.ts, docs/cmmac.md). `kais train --export-layers <dir>` writes the same
 * at the end of a run. The shipped models/kais-cmmac-tfjs/ was made with
 * `kais export --checkpoint models/kais-cmmac.bin --layers models/kais-cmmac-tfjs`, and
 * models/kais-cmmac-gpg-tfjs/ (the opt-in actor fine-tuned on GPG, sampling) the same way from models/kais-cmmac-gpg.bin.
 */
import * as fs from 'fs';
import * as path from 'path';
import type { Argv, CommandModule } from 'yargs';
import { namingFlags, opt, resolveOptions, yargsOptions, type OptionsOf } from '../../shared/config';
import { UsageError } from '../../shared/errors';
import { checkLayersTarget, writeActorLayers, type ActorLayersMeta } from '../../shared/nets/actor-layers';
import { loadScenario, topologyOf } from '../../shared/scenario';
import { observationDim, targetBlockOf } from '../../shared/spaces';
import { loadBackend } from '../../shared/tf-backend';
import { CheckpointDb, checkScenario } from '../../shared/nets/checkpoint-db';
import { actorHeadOf, checkpointActor, isActorFile, modelAct } from '../../shared/nets/actor-file';

export const EXPORT_SPEC = {
  checkpoint: opt.file({
    demand: true,
    describe: 'the actor to export: an exported actor .bin (with its .json) or a kais train SQLite file',
  }),
  layers: opt.outDir({ demand: true, describe: 'folder to write the TensorFlow.js layers model into (model.json + weights.bin)' }),
  scenario: opt.optString({
    defaultText: 'the one the checkpoint was trained on',
    describe: 'built-in scenario or a scenario JSON file (a file scenario must be given)',
  }),
};

export type ExportArgs = OptionsOf<typeof EXPORT_SPEC>;

/** What a checkpoint says it fits: an actor file's `.json`, or a database's stored config. */
function checkpointMeta(file: string): ActorLayersMeta {
  let m: Partial<ActorLayersMeta> | null;
  if (isActorFile(file)) {
    try {
      m = JSON.parse(fs.readFileSync(`${file}.json`, 'utf8')) as Partial<ActorLayersMeta>;
    } catch (e) {
      throw new UsageError(`${file}.json: not readable (${(e as Error).message.split('\n')[0]})`, 'KAIS_ERR_CHECKPOINT');
    }
  } else {
    const db = CheckpointDb.open(file, 'read');
    try {
      m = db.config<Partial<ActorLayersMeta>>() ?? null;
    } finally {
      db.close();
    }
  }
  if (!m || typeof m.scenario !== 'string' || typeof m.scenarioFingerprint !== 'string') {
    throw new UsageError(`${file}: not a usable kais checkpoint (no scenario recorded)`, 'KAIS_ERR_CHECKPOINT');
  }
  return {
    scenario: m.scenario,
    scenarioFingerprint: m.scenarioFingerprint,
    head: actorHeadOf(file, m.head, isActorFile(file) ? 'sidecar' : 'database'),
    obsDim: Number(m.obsDim),
    numActions: Number(m.numActions),
    ...(m.frame !== undefined ? { frame: m.frame } : {}),
    ...(m.evalThroughputRate != null ? { evalThroughputRate: m.evalThroughputRate } : {}),
    // how the actor is meant to act (an exported actor's act, a database's --eval-act): sample, or argmax when absent
    ...(modelAct(file) === 'sample' ? { act: 'sample' } : {}),
  };
}

/**
 * The folder a layers model is to be written into, checked by trying it: checkLayersTarget's rules,
 * then a missing folder is made (one level at a time: Node's recursive mkdir never returns under
 * /proc) and removed again, an existing one takes a probe file that is removed again. So a folder
 * the files cannot go into (a read-only or special file system, one `access` calls writable for
 * root) is refused before any work (`kais train --export-layers` before it trains), and nothing is
 * left behind. A problem is a UsageError starting with the path.
 */
export function checkLayersDir(dir: string): void {
  const made: string[] = [];
  let doing = 'create';
  try {
    checkLayersTarget(dir);
    if (fs.statSync(dir, { throwIfNoEntry: false })) {
      doing = 'write files into';
      const probe = path.join(dir, `.kais-probe-${process.pid}-${Math.random().toString(36).slice(2)}`);
      fs.closeSync(fs.openSync(probe, 'wx'));
      fs.unlinkSync(probe);
    } else {
      // the levels that do not exist yet, the top one first (a link to nothing: mkdir says EEXIST)
      const missing: string[] = [];
      for (let p = path.resolve(dir); !fs.lstatSync(p, { throwIfNoEntry: false }); p = path.dirname(p)) {
        missing.unshift(p);
        if (path.dirname(p) === p) break;
      }
      if (missing.length === 0) missing.push(path.resolve(dir));
      for (const m of missing) {
        fs.mkdirSync(m);
        made.push(m);
      }
    }
  } catch (e) {
    if (e instanceof UsageError) throw e;
    throw new UsageError(`${dir}: cannot ${doing} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message.split('\n')[0]})`);
  } finally {
    for (const m of made.reverse()) {
      try {
        fs.rmdirSync(m);
      } catch {
        // not empty any more: what another process put there is not ours to remove
      }
    }
  }
}

/** Writes the layers model of `checkpoint`'s actor into `dir`; returns the files written. */
export async function exportLayers(checkpoint: string, dir: string, scenarioName?: string | null): Promise<string[]> {
  checkLayersDir(dir); // a folder that cannot take the files is refused before anything is read or written
  const meta = checkpointMeta(checkpoint);
  const scenario = loadScenario(scenarioName ?? meta.scenario);
  checkScenario(checkpoint, meta, scenario);
  const topo = topologyOf(scenario);
  const shape = { numServices: topo.numServices, numTargets: topo.numNodes + 1, numEaps: topo.numEaps };
  const obsDim = observationDim(shape);
  const actor = checkpointActor(checkpoint);
  if (actor.tensors[0]?.shape[0] !== obsDim || meta.numActions !== shape.numTargets) {
    throw new UsageError(
      `${checkpoint}: not a usable kais checkpoint (actor shapes do not fit scenario ${scenario.name})`,
      'KAIS_ERR_CHECKPOINT',
    );
  }
  const spec = { obsDim, numActions: shape.numTargets, head: actor.head, targetBlock: targetBlockOf(shape) };
  return writeActorLayers(
    dir,
    actor.tensors.map((t) => t.data),
    spec,
    { ...meta, head: actor.head, obsDim, numActions: shape.numTargets, targetBlock: spec.targetBlock },
  );
}

export const exportCommand: CommandModule<object, object> = {
  command: 'export',
  describe: "write a checkpoint's actor as a TensorFlow.js layers model (model.json + weights.bin)",
  builder: (y: Argv<object>) =>
    yargsOptions(
      y.example('$0 export --checkpoint models/kais-cmmac.bin --layers /tmp/kais-tfjs', 'the shipped model for tf.loadLayersModel'),
      EXPORT_SPEC,
    ),
  handler: namingFlags(EXPORT_SPEC, async (argv) => {
    const args: ExportArgs = resolveOptions(EXPORT_SPEC, argv);
    await loadBackend(); // an entry point picks the backend
    const files = await exportLayers(args.checkpoint as string, args.layers as string, args.scenario);
    for (const f of files) process.stdout.write(`wrote ${f}\n`);
  }),
};
