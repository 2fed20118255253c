/* The kais dashboard (orchestrator/dashboard.ts serves it). No framework: one snapshot a second
 * from /dashboard/stream (Server-Sent Events read with fetch, so the admin token goes in a header),
 * DOM elements made once per node and per eAP and updated in place, charts by uPlot. */
/* global document, window, fetch, sessionStorage, location, history, uPlot, TextDecoder, performance */
'use strict';

const $ = (id) => document.getElementById(id);
const el = (tag, cls, text) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
};
const hhmmss = (ms) => new Date(ms).toTimeString().slice(0, 8);
const pct = (x) => (x === null || x === undefined ? '–' : `${Math.round(x * 100)}%`);
const ALERT_KINDS = /denied|quarantine|refused|failed|error|invalid|rate|anomal|epoch/;
const PALETTE = ['#58a6ff', '#3fb950', '#d29922', '#f85149', '#a371f7', '#39c5cf', '#ff7b72', '#e3b341', '#8ddb8c', '#79c0ff'];

/** The admin token: from the fragment (#token=..., never sent to the server), else the tab's storage. */
function readToken() {
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem('kais-admin-token', decodeURIComponent(m[1]));
    history.replaceState(null, '', location.pathname);
  }
  return sessionStorage.getItem('kais-admin-token');
}

const state = { nodes: [], agents: [], eaps: [], charts: {}, built: '' };

function chart(id, series, yLabel, legend = true) {
  const target = $(id);
  const width = Math.max(320, target.clientWidth || 480);
  const opts = {
    width,
    height: 200,
    series: [{}, ...series.map((s, i) => ({ stroke: s.color || PALETTE[i % PALETTE.length], width: 1.5, ...s }))],
    axes: [
      { stroke: '#8a97a5', grid: { stroke: '#243040' } },
      { stroke: '#8a97a5', grid: { stroke: '#243040' }, label: yLabel },
    ],
    legend: { live: false, show: legend },
  };
  return new uPlot(opts, [[], ...series.map(() => [])], target);
}

/** Chart data with at least two x values: one point or none would stretch the time axis over years. */
function atLeastTwo(xs, ys, nowS) {
  if (xs.length >= 2) return [xs, ...ys];
  const end = xs.length === 1 ? xs[0] : nowS;
  const pad = xs.length === 0 ? [end] : [];
  return [[end - 60, ...xs, ...pad], ...ys.map((y) => [null, ...y, ...pad.map(() => null)])];
}

function buildCharts(snap) {
  for (const c of Object.values(state.charts)) c.destroy();
  state.charts.throughput = chart(
    'chart-throughput',
    [
      { label: 'dispatched' },
      { label: 'in time' },
      { label: 'in time, simulator', color: '#f0f6fc', width: 2 },
      { label: 'forecast arrivals', dash: [6, 4], color: '#d29922' },
    ],
    'req/s',
  );
  state.charts.placements = chart(
    'chart-placements',
    Array.from({ length: snap.services }, (_, w) => ({ label: `service ${w}` })),
    'replicas',
    snap.services <= 10,
  );
  state.charts.learning = chart(
    'chart-learning',
    [
      { label: 'mean reward', scale: 'y' },
      { label: 'KL', scale: 'kl', color: '#a371f7' },
    ],
    'reward',
  );
}

/** Node cards grouped by eAP and one chip per eAP: made once, then updated in place. */
function buildTopology(snap) {
  const topo = $('topology');
  topo.replaceChildren();
  const groups = [];
  state.eaps = [];
  for (let b = 0; b < snap.numEaps; b++) {
    const g = el('div', 'eap');
    const label = el('div', 'label', `eAP ${b}`);
    g.append(label);
    state.eaps.push({ group: g, label });
    const box = el('div', 'nodes');
    g.append(box);
    topo.append(g);
    groups.push(box);
  }
  state.nodes = snap.nodes.map((n) => {
    const card = el('div', 'node');
    card.dataset.node = String(n.id);
    const name = el('span', 'name', `node ${n.id}`);
    const health = el('span', 'health');
    const bar = el('div', 'bar');
    const fill = el('i');
    bar.append(fill);
    const load = el('div', 'load');
    const reps = el('div', 'reps');
    card.append(name, health, bar, load, reps);
    groups[n.eap].append(card);
    return { card, health, fill, load, reps };
  });
  const agents = $('agents');
  agents.replaceChildren();
  state.agents = Array.from({ length: snap.numEaps }, (_, b) => {
    const chip = el('span', 'agent', String(b));
    chip.dataset.eap = String(b);
    agents.append(chip);
    return chip;
  });
}

function render(snap) {
  const t0 = performance.now();
  const shape = `${snap.nodes.length}/${snap.numEaps}/${snap.services}`;
  if (state.built !== shape) {
    buildTopology(snap);
    buildCharts(snap);
    state.built = shape;
  }
  const connected = new Set(snap.agents.map((a) => a.eap));
  $('summary').textContent =
    `${snap.scenario} · ${snap.orchestration} · weights v${snap.weightVersion ?? '–'} · placement v${snap.placementVersion ?? '–'} ` +
    `(frame ${snap.frame}) · ${connected.size}/${snap.numEaps} agents · ${snap.nodes.length} nodes · ${hhmmss(snap.tsMs)}`;

  snap.nodes.forEach((n, i) => {
    const v = state.nodes[i];
    v.card.className = `node ${n.health}`;
    v.card.dataset.health = n.health;
    v.card.title = n.heldReason ? `held: ${n.heldReason}` : `node ${n.id} (eAP ${n.eap}): ${n.health}`;
    v.health.textContent = n.health;
    v.fill.style.width = `${Math.min(100, Math.round(n.cpu * 100))}%`;
    v.load.textContent = `cpu ${pct(n.cpu)} · ${n.requestsPerS} req/s · ${pct(n.inTimeShare)} of answers in time`;
    const total = n.replicas.reduce((a, b) => a + b, 0);
    const running = n.replicas.map((r, w) => [w, r]).filter(([, r]) => r > 0);
    v.reps.textContent = `${total} replicas of ${running.length} services`;
    v.reps.title = running.map(([w, r]) => `service ${w}: ${r}`).join('\n') || 'no replica';
  });

  const versions = new Map();
  for (const a of snap.agents) versions.set(a.eap, [...(versions.get(a.eap) || []), a]);
  // the eAPs a running canary holds: their agents and their group of nodes are marked
  const safe = snap.safeLearning || { lines: [], canaryEaps: [] };
  const underCanary = new Set(safe.canaryEaps);
  state.agents.forEach((chip, b) => {
    const sessions = versions.get(b) || [];
    const canary = underCanary.has(b);
    chip.className = `${sessions.length > 0 ? 'agent up' : 'agent'}${canary ? ' canary' : ''}`;
    chip.dataset.connected = String(sessions.length > 0);
    chip.dataset.canary = String(canary);
    chip.title =
      (sessions.length > 0
        ? sessions
            .map((s) => `eAP ${b} session ${s.session}: weights v${s.weightVersion ?? '–'}, placement v${s.placementVersion ?? '–'}`)
            .join('\n')
        : `eAP ${b}: no agent connected`) + (canary ? '\nunder canary: the version being judged dispatches here' : '');
  });
  state.eaps.forEach((g, b) => {
    const canary = underCanary.has(b);
    g.group.className = canary ? 'eap canary' : 'eap';
    g.label.textContent = canary ? `eAP ${b} · canary` : `eAP ${b}`;
  });
  $('safe-learning').replaceChildren(
    ...(safe.lines.length > 0
      ? safe.lines.map((line) => {
          const cls = line.startsWith(' ')
            ? 'sub'
            : /^rejected:|^canary: last verdict: \S+ rollback/.test(line)
              ? 'alert'
              : /^canary: v\d/.test(line)
                ? 'running'
                : '';
          return el('li', cls, line.trim());
        })
      : [
          el(
            'li',
            'sub',
            'off: no online learner, weight gate or canary on this orchestrator (config "learner", "gate", "canary"; kais up learns by default, --gate, --canary)',
          ),
        ]),
  );
  $('agents-count').textContent = `${connected.size} of ${snap.numEaps} connected (${snap.agents.length} sessions)`;

  // services: replicas now, forecast, override
  const totals = Array.from({ length: snap.services }, (_, w) => snap.nodes.reduce((a, n) => a + (n.replicas[w] || 0), 0));
  const rows = totals.map((r, w) => {
    const tr = el('tr');
    tr.dataset.service = String(w);
    const o = snap.overrides.find((x) => x.service === w);
    tr.append(
      el('td', '', `service ${w}`),
      el('td', 'replicas', String(r)),
      el('td', '', snap.forecast ? snap.forecast[w].toFixed(2) : '–'),
      el(
        'td',
        'override',
        o
          ? `${o.replicas}${o.node === null ? ' in total' : ` on node ${o.node}`} by ${o.by}: ${o.reason}${o.untilMs ? ` (until ${hhmmss(o.untilMs)})` : ''}`
          : '',
      ),
    );
    return tr;
  });
  document.querySelector('#services tbody').replaceChildren(...rows);

  const t = snap.throughput;
  const nowS = snap.tsMs / 1000;
  state.charts.throughput.setData(
    atLeastTwo(
      t.map((r) => r[0] / 1000),
      [t.map((r) => r[1]), t.map((r) => r[2]), t.map((r) => r[4]), t.map((r) => r[3])],
      nowS,
    ),
  );
  $('prediction-state').textContent = predictionText(snap.prediction);
  const p = snap.placements;
  state.charts.placements.setData(
    atLeastTwo(
      p.map((r) => r.tsMs / 1000),
      Array.from({ length: snap.services }, (_, w) => p.map((r) => r.replicas[w])),
      nowS,
    ),
  );
  const curve = snap.learner ? snap.learner.curve : [];
  state.charts.learning.setData(
    atLeastTwo(
      curve.map((c) => c.tsMs / 1000),
      [curve.map((c) => c.meanReward), curve.map((c) => c.approxKl)],
      nowS,
    ),
  );
  $('learner-state').textContent = snap.learner
    ? `${snap.learner.updates} updates, ${snap.learner.published} published; last mean reward ${snap.learner.lastMeanReward.toFixed(4)}, KL ${snap.learner.lastApproxKl.toFixed(5)}`
    : 'the online learner is off';

  const events = snap.events.slice().reverse();
  $('events').replaceChildren(
    ...events.map((e) => {
      const li = el('li', e.kind.startsWith('admin') ? 'admin' : ALERT_KINDS.test(e.kind) ? 'alert' : '');
      li.dataset.kind = e.kind;
      const time = el('time', '', hhmmss(e.tsMs));
      li.append(time, el('span', 'kind', e.kind), el('span', 'msg', `${e.eap !== null ? `eAP ${e.eap}: ` : ''}${e.message}`));
      return li;
    }),
  );

  const trail = document.querySelector('#trail tbody');
  if (snap.trail.length === 0) {
    const tr = el('tr');
    const td = el(
      'td',
      'none',
      'no decision sent as experience yet (agents send them when they explore: kais up --learn, kais agent --explore or --experience all)',
    );
    td.colSpan = 7;
    tr.append(td);
    trail.replaceChildren(tr);
  } else
    trail.replaceChildren(
      ...snap.trail
        .slice()
        .reverse()
        .map((d) => {
          const tr = el('tr');
          tr.append(
            el('td', '', hhmmss(d.tsMs)),
            el('td', '', String(d.eap)),
            el('td', '', String(d.service)),
            el('td', '', d.target === 'cloud' ? 'cloud' : `node ${d.target}`),
            el('td', d.outcome.replace(' ', '-'), d.outcome),
            el('td', '', d.latencyMs === null ? '–' : String(d.latencyMs)),
            el('td', '', d.weightVersion === null ? 'heuristic' : `v${d.weightVersion}`),
          );
          return tr;
        }),
    );
  document.querySelector('#flows tbody').replaceChildren(
    ...snap.flows
      .slice(-20)
      .reverse()
      .map((f) => {
        const tr = el('tr');
        tr.append(
          el('td', '', hhmmss(f.tsMs)),
          el('td', '', String(f.eap)),
          el('td', '', `node ${f.node}`),
          el('td', '', String(f.requests)),
          el('td', '', String(f.succeeded)),
          el('td', '', String(f.inDeadline)),
          el('td', '', f.meanLatencyMs === null ? '–' : String(f.meanLatencyMs)),
        );
        return tr;
      }),
  );
  // for tests and the bench: snapshots rendered, the last one's time, and the slowest render (ms)
  const k = window.kaisDashboard || { snapshots: 0, maxRenderMs: 0 };
  const ms = performance.now() - t0;
  window.kaisDashboard = {
    snapshots: k.snapshots + 1,
    last: snap.tsMs,
    renderMs: ms,
    maxRenderMs: Math.max(k.maxRenderMs, ms),
    charts: state.charts,
    prediction: snap.prediction,
  };
}

/** What the simulator predicted for this run against what the agents report (or that there is no prediction). */
function predictionText(p) {
  if (!p)
    return 'no simulator prediction: this orchestrator was started without one (kais up gives it the simulator\'s for the same requests; config "prediction")';
  const head = `simulator prediction (${p.policy}, the same requests): throughput rate ${pct(p.throughputRate)} over the run`;
  if (p.startMs === null) return `${head}; waiting for the run to start`;
  const now =
    p.frame !== null && p.frame < p.frames
      ? `frame ${p.frame + 1} of ${p.frames}: ${p.inTimePerS} in time/s of ${p.arrivalsPerS} arrivals/s predicted`
      : p.frame === null
        ? 'the run starts soon'
        : `past the ${p.frames} predicted frames`;
  const s = p.since;
  const since = s
    ? `; in time since ${hhmmss(s.fromMs)}: live ${s.liveInTime}, predicted ${Math.round(s.predictedInTime)}` +
      (s.livePerPredicted !== null ? ` (live / predicted ${s.livePerPredicted.toFixed(2)})` : '')
    : '';
  return `${head}; ${now}${since}`;
}

function setConn(on, text) {
  const c = $('conn');
  c.className = `conn ${on ? 'on' : 'off'}`;
  c.textContent = text;
}

function askToken(why) {
  $('main').hidden = true;
  $('login').hidden = false;
  $('login-error').textContent = why || '';
}

/** Reads the stream until it ends; reconnects after 2 s unless the token is refused. */
async function stream(token) {
  let res;
  try {
    res = await fetch('/dashboard/stream', { headers: { authorization: `Bearer ${token}` } });
  } catch (e) {
    setConn(false, 'offline, retrying');
    setTimeout(() => stream(token), 2000);
    return;
  }
  if (res.status === 401 || res.status === 403) {
    sessionStorage.removeItem('kais-admin-token');
    setConn(false, 'refused');
    askToken('the orchestrator refused that token');
    return;
  }
  if (!res.ok || !res.body) {
    setConn(false, `HTTP ${res.status}, retrying`);
    setTimeout(() => stream(token), 2000);
    return;
  }
  $('login').hidden = true;
  $('main').hidden = false;
  setConn(true, 'live');
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    let chunk;
    try {
      chunk = await reader.read();
    } catch (e) {
      break;
    }
    if (chunk.done) break;
    buf += dec.decode(chunk.value, { stream: true });
    let cut;
    while ((cut = buf.indexOf('\n\n')) >= 0) {
      const msg = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      const data = msg
        .split('\n')
        .filter((l) => l.startsWith('data: '))
        .map((l) => l.slice(6))
        .join('\n');
      if (data) render(JSON.parse(data));
    }
  }
  setConn(false, 'offline, retrying');
  setTimeout(() => stream(token), 2000);
}

$('login').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const t = $('token').value.trim();
  if (!t) return;
  sessionStorage.setItem('kais-admin-token', t);
  stream(t);
});

const token = readToken();
if (token) stream(token);
else askToken();
