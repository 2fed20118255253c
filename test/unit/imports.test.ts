/**
 * The import graph of the project's sources (README, "Layout"; STYLE.md section 3, "Import rules"),
 * read from the TypeScript syntax tree of every .ts under the source folders and the root: static
 * imports and re-exports (type-only ones too), `require('...')`, `import('...')` and
 * `import('...').T` types.
 *   (a) no cycle among project files (the failure names the cycle, file by file);
 *   (b) the arrows between rooms run one way: shared/ imports nothing from the project; agent/ and
 *       critic/ import shared/ only; orchestrator/ adds critic/; training/ everything but the
 *       launcher; launcher/, scripts/ and the root files anything;
 *   (c) the simulator (training/sim/ and everything it loads) and the transport files
 *       (orchestrator/hub.ts, agent/link.ts, shared/protocol/*) load no @tensorflow package;
 *   (d) shared/lifecycle.ts (signals, parent watch, ports) is loaded by entry points only.
 * The checks run first on a small made-up graph, so a checker that sees nothing fails too.
 */
import * as fs from 'node:fs';
import { builtinModules } from 'node:module';
import * as path from 'node:path';
import * as ts from 'typescript';

const ROOT = path.resolve(__dirname, '..', '..');
const SOURCE_DIRS = ['agent', 'critic', 'orchestrator', 'shared', 'training', 'launcher', 'scripts'];

/** One file's imports: project files (relative to ROOT) and package names; `runtime*` without the type-only ones. */
interface FileImports {
  files: string[];
  packages: string[];
  runtimeFiles: string[];
  runtimePackages: string[];
}
type Graph = Map<string, FileImports>;

/** A module specifier a source names; `typeOnly` when nothing of it is loaded at run time. */
export interface Specifier {
  spec: string;
  typeOnly: boolean;
}

/** `import type`, `export type`, or named imports/exports that are all `type X` (tsc drops them). */
function typeOnlyDeclaration(node: ts.ImportDeclaration | ts.ExportDeclaration): boolean {
  if (ts.isExportDeclaration(node)) {
    if (node.isTypeOnly) return true;
    const c = node.exportClause;
    return c !== undefined && ts.isNamedExports(c) && c.elements.length > 0 && c.elements.every((e) => e.isTypeOnly);
  }
  const clause = node.importClause;
  if (!clause) return false; // import './side-effect'
  if (clause.isTypeOnly) return true;
  const named = clause.namedBindings;
  return (
    clause.name === undefined &&
    named !== undefined &&
    ts.isNamedImports(named) &&
    named.elements.length > 0 &&
    named.elements.every((e) => e.isTypeOnly)
  );
}

/** Every module specifier a source names, in order of appearance. */
export function specifiers(source: string, fileName = 'x.ts'): Specifier[] {
  const sf = ts.createSourceFile(fileName, source, ts.ScriptTarget.ES2022, false, ts.ScriptKind.TS);
  const out: Specifier[] = [];
  const visit = (node: ts.Node): void => {
    if (
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      out.push({ spec: node.moduleSpecifier.text, typeOnly: typeOnlyDeclaration(node) });
    } else if (
      ts.isImportEqualsDeclaration(node) &&
      ts.isExternalModuleReference(node.moduleReference) &&
      ts.isStringLiteral(node.moduleReference.expression)
    ) {
      out.push({ spec: node.moduleReference.expression.text, typeOnly: node.isTypeOnly });
    } else if (ts.isCallExpression(node) && node.arguments.length >= 1 && ts.isStringLiteralLike(node.arguments[0])) {
      const callee = node.expression;
      const isRequire = ts.isIdentifier(callee) && callee.text === 'require';
      const isRequireResolve =
        ts.isPropertyAccessExpression(callee) && ts.isIdentifier(callee.expression) && callee.expression.text === 'require';
      if (isRequire || isRequireResolve || callee.kind === ts.SyntaxKind.ImportKeyword)
        out.push({ spec: node.arguments[0].text, typeOnly: false });
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      out.push({ spec: node.argument.literal.text, typeOnly: true });
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

/** The package a bare specifier names ('@scope/name' or 'name'); null for node builtins. */
function packageOf(spec: string): string | null {
  if (spec.startsWith('node:')) return null;
  const parts = spec.split('/');
  const name = spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
  return builtinModules.includes(name) ? null : name;
}

/** The project file a relative specifier of `from` resolves to (as tsc/node would), or null. */
function resolveRelative(from: string, spec: string): string | null {
  const base = path.join(path.dirname(from), spec);
  for (const c of [base, `${base}.ts`, `${base}.json`, path.join(base, 'index.ts')]) {
    const abs = path.join(ROOT, c);
    if (fs.existsSync(abs) && fs.statSync(abs).isFile()) return c.split(path.sep).join('/');
  }
  return null;
}

function sourceFiles(): string[] {
  const out = fs.readdirSync(ROOT).filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'));
  const walk = (dir: string): void => {
    if (!fs.existsSync(path.join(ROOT, dir))) return;
    for (const e of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
      const rel = `${dir}/${e.name}`;
      if (e.isDirectory()) walk(rel);
      else if (e.name.endsWith('.ts') && !e.name.endsWith('.d.ts')) out.push(rel);
    }
  };
  for (const d of SOURCE_DIRS) walk(d);
  return out.sort();
}

/** The project's graph; an unresolvable relative import is an error of its own. */
function projectGraph(): { graph: Graph; unresolved: string[] } {
  const graph: Graph = new Map();
  const unresolved: string[] = [];
  for (const f of sourceFiles()) {
    const imports: FileImports = { files: [], packages: [], runtimeFiles: [], runtimePackages: [] };
    const add = (list: string[], x: string) => list.includes(x) || list.push(x);
    for (const { spec, typeOnly } of specifiers(fs.readFileSync(path.join(ROOT, f), 'utf8'), f)) {
      if (spec.startsWith('.')) {
        const target = resolveRelative(f, spec);
        if (target === null) unresolved.push(`${f} -> ${spec}`);
        else if (target.endsWith('.ts')) {
          add(imports.files, target);
          if (!typeOnly) add(imports.runtimeFiles, target);
        }
      } else {
        const pkg = packageOf(spec);
        if (pkg !== null) {
          add(imports.packages, pkg);
          if (!typeOnly) add(imports.runtimePackages, pkg);
        }
      }
    }
    graph.set(f, imports);
  }
  return { graph, unresolved };
}

/** A cycle as a path a -> b -> ... -> a, or null (depth-first, files in sorted order). */
export function findCycle(graph: Graph): string[] | null {
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (f: string): string[] | null => {
    state.set(f, 'open');
    stack.push(f);
    for (const g of graph.get(f)?.files ?? []) {
      if (state.get(g) === 'open') return [...stack.slice(stack.indexOf(g)), g];
      if (state.get(g) === undefined && graph.has(g)) {
        const c = visit(g);
        if (c) return c;
      }
    }
    stack.pop();
    state.set(f, 'done');
    return null;
  };
  for (const f of [...graph.keys()].sort()) {
    if (state.get(f) === undefined) {
      const c = visit(f);
      if (c) return c;
    }
  }
  return null;
}

/** The room a file lives in: its top-level folder, or 'root' for kais.ts and its neighbours. */
export function roomOf(file: string): string {
  return file.includes('/') ? file.slice(0, file.indexOf('/')) : 'root';
}

/** Which rooms each room may import (itself always). */
export const ALLOWED: Record<string, string[] | '*'> = {
  shared: [],
  agent: ['shared'],
  critic: ['shared'],
  orchestrator: ['shared', 'critic'],
  training: ['shared', 'agent', 'critic', 'orchestrator'],
  launcher: '*',
  scripts: '*',
  root: '*',
};

/** Every import that runs against the arrows, as 'from -> to'. */
export function directionViolations(graph: Graph): string[] {
  const out: string[] = [];
  for (const [f, { files }] of graph) {
    const allowed = ALLOWED[roomOf(f)];
    if (allowed === undefined) {
      out.push(`${f}: not in a known room`);
      continue;
    }
    if (allowed === '*') continue;
    for (const g of files) {
      const to = roomOf(g);
      if (to !== roomOf(f) && !allowed.includes(to)) out.push(`${f} -> ${g}`);
    }
  }
  return out.sort();
}

/** The files `start` loads, itself included, through project imports. */
export function closure(graph: Graph, start: string[]): Set<string> {
  const seen = new Set<string>();
  const todo = [...start];
  while (todo.length > 0) {
    const f = todo.pop()!;
    if (seen.has(f)) continue;
    seen.add(f);
    todo.push(...(graph.get(f)?.files ?? []));
  }
  return seen;
}

/**
 * For each file `start` loads at run time (type-only imports are dropped by tsc) that loads a
 * package matching `pkg`: 'file: package (via a -> b -> file)'.
 */
export function packagePaths(graph: Graph, start: string[], pkg: RegExp): string[] {
  const parent = new Map<string, string | null>();
  const queue: string[] = [];
  for (const s of start) {
    if (!parent.has(s)) {
      parent.set(s, null);
      queue.push(s);
    }
  }
  const out: string[] = [];
  while (queue.length > 0) {
    const f = queue.shift()!;
    for (const p of graph.get(f)?.runtimePackages ?? []) {
      if (pkg.test(p)) {
        const chain: string[] = [];
        for (let c: string | null = f; c !== null; c = parent.get(c) ?? null) chain.unshift(c);
        out.push(`${f}: ${p} (via ${chain.join(' -> ')})`);
      }
    }
    for (const g of graph.get(f)?.runtimeFiles ?? []) {
      if (!parent.has(g)) {
        parent.set(g, f);
        queue.push(g);
      }
    }
  }
  return out;
}

/** Entry points: the files that start a process or a command. */
export function isEntryPoint(file: string): boolean {
  return (
    roomOf(file) === 'root' ||
    roomOf(file) === 'launcher' ||
    roomOf(file) === 'scripts' ||
    /(^|\/)(main|[\w-]*cli|[\w-]*worker)\.ts$/.test(file) ||
    file.startsWith('training/jobs/')
  );
}

const LIFECYCLE = 'shared/lifecycle.ts';
const TFJS = /^@tensorflow\//;
const TRANSPORT = (f: string): boolean => f === 'orchestrator/hub.ts' || f === 'agent/link.ts' || f.startsWith('shared/protocol/');
const SIMULATOR = (f: string): boolean => f.startsWith('training/sim/');

/** A made-up graph: file -> what it imports (files end in .ts; 'type:' marks a type-only import). */
function graphOf(edges: Record<string, string[]>): Graph {
  const g: Graph = new Map();
  for (const [f, to] of Object.entries(edges)) {
    const all = to.map((t) => t.replace(/^type:/, ''));
    const runtime = to.filter((t) => !t.startsWith('type:'));
    const isFile = (t: string) => t.endsWith('.ts');
    g.set(f, {
      files: all.filter(isFile),
      packages: all.filter((t) => !isFile(t)),
      runtimeFiles: runtime.filter(isFile),
      runtimePackages: runtime.filter((t) => !isFile(t)),
    });
  }
  return g;
}

describe('the checker, on a made-up graph', () => {
  const bad = graphOf({
    'shared/a.ts': ['agent/b.ts'],
    'agent/b.ts': ['shared/c.ts'],
    'shared/c.ts': ['shared/a.ts'],
    'critic/d.ts': ['orchestrator/e.ts', '@tensorflow/tfjs'],
    'orchestrator/e.ts': ['shared/c.ts'],
    'training/sim/env.ts': ['training/sim/f.ts'],
    'training/sim/f.ts': ['critic/d.ts', 'type:critic/h.ts'],
    'critic/h.ts': ['@tensorflow/tfjs-core'],
    'training/g.ts': ['launcher/up.ts'],
    'launcher/up.ts': ['training/g.ts'],
  });

  it('reads imports, re-exports, require, import() and import types, not comments or strings', () => {
    const src = [
      "import a from './a';",
      "import type { B } from '../b';",
      "export { c } from './c';",
      "export * from '@scope/pkg/deep';",
      "const d = require('./d');",
      "const e = await import('./e');",
      "let f: import('./f').F;",
      "import g = require('g');",
      "import { type H, type I } from './hi';",
      "export type { J } from './j';",
      "import { type K, L } from './kl';",
      "import './side';",
      "// require('./not-me')",
      "/* import x from './nor-me' */",
      'const s = "require(\'./nor-this\')";',
    ].join('\n');
    expect(specifiers(src).map((s) => `${s.typeOnly ? 'type ' : ''}${s.spec}`)).toEqual([
      './a',
      'type ../b',
      './c',
      '@scope/pkg/deep',
      './d',
      './e',
      'type ./f',
      'g',
      'type ./hi',
      'type ./j',
      './kl',
      './side',
    ]);
  });

  it('finds a cycle and names its path', () => {
    expect(findCycle(bad)).toEqual(['agent/b.ts', 'shared/c.ts', 'shared/a.ts', 'agent/b.ts']);
    expect(findCycle(graphOf({ 'a/x.ts': ['a/y.ts'], 'a/y.ts': [], 'a/z.ts': ['a/y.ts', 'a/x.ts'] }))).toBeNull();
  });

  it('finds the arrows that run the wrong way', () => {
    expect(directionViolations(bad)).toEqual([
      'critic/d.ts -> orchestrator/e.ts',
      'shared/a.ts -> agent/b.ts',
      'training/g.ts -> launcher/up.ts',
    ]);
  });

  it('finds tfjs behind the simulator, with the path that loads it (not behind a type-only import)', () => {
    expect(packagePaths(bad, ['training/sim/env.ts'], TFJS)).toEqual([
      'critic/d.ts: @tensorflow/tfjs (via training/sim/env.ts -> training/sim/f.ts -> critic/d.ts)',
    ]);
    expect(packagePaths(bad, ['orchestrator/e.ts'], TFJS)).toEqual([]);
  });
});

describe('the project import graph', () => {
  const { graph, unresolved } = projectGraph();

  it('reads the whole tree, and every relative import resolves to a file', () => {
    expect(graph.size).toBeGreaterThan(100);
    expect(graph.has('kais.ts')).toBe(true);
    expect(graph.has('training/sim/env.ts')).toBe(true);
    expect(unresolved).toEqual([]);
  });

  it('has no import cycle', () => {
    const cycle = findCycle(graph);
    expect(cycle === null ? 'no cycle' : `cycle: ${cycle.join(' -> ')}`).toBe('no cycle');
  });

  it('has its arrows between rooms one way (shared <- agent, critic <- orchestrator <- training <- launcher, scripts)', () => {
    expect(directionViolations(graph)).toEqual([]);
  });

  it('keeps tfjs out of the simulator and the transport files', () => {
    const sim = [...graph.keys()].filter(SIMULATOR);
    expect(sim).toContain('training/sim/env.ts');
    expect(packagePaths(graph, sim, TFJS)).toEqual([]);
    const transport = [...graph.keys()].filter(TRANSPORT);
    expect(transport).toEqual(expect.arrayContaining(['orchestrator/hub.ts', 'agent/link.ts', 'shared/protocol/codec.ts']));
    expect(packagePaths(graph, transport, TFJS)).toEqual([]);
  });

  it('loads the process lifecycle helpers from entry points only', () => {
    const users = [...graph].filter(([, i]) => i.files.includes(LIFECYCLE)).map(([f]) => f);
    expect(users.length).toBeGreaterThan(0);
    expect(users.filter((f) => !isEntryPoint(f))).toEqual([]);
  });
});
