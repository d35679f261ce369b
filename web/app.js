// lathe explorer: the page over the JSON API of `lathe lab serve` (docs/explorer.md).
// Every string from the data goes into the page as text (textContent, text nodes, form
// values), never as HTML. The page's state lives in the URL's hash, so a link can be shared.
'use strict';

const STATUSES = ['pass', 'fail', 'error', 'timeout', 'oom', 'unsupported', 'untested'];
const VIEWS = ['all', 'selected', 'trending', 'downloads'];
const PAGE = 50;
// Parameter-count ranges of the size filter: "MIN-MAX", MAX not included, either end open.
const SIZES = [['', 'any size'], ['0-1e8', 'under 100M'], ['1e8-1e9', '100M to 1B'],
  ['1e9-1e10', '1B to 10B'], ['1e10-1e11', '10B to 100B'], ['1e11-', '100B and more']];
const DEFAULTS = {
  tab: 'models', task: 'text-generation', view: 'all', q: '', lathe: '', tf: 'any',
  status: '', arch: '', size: '', sort: '', order: 'asc', page: '0', model: '', dtype: '', rev: '',
  a: '', atf: 'any', b: '', btf: 'any',
};

const $ = (id) => document.getElementById(id);

// Builds an element; children are nodes or strings (strings become text nodes).
function el(tag, props, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(e.dataset, v);
    else e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
  return e;
}

function clear(node) { node.replaceChildren(); return node; }

function badge(status) {
  const known = STATUSES.includes(status) ? status : 'unknown';
  return el('span', { class: 'badge badge-' + known, text: status });
}

function announce(text) { $('announce').textContent = text; }

// ---- state in the URL -------------------------------------------------------------------

function readState() {
  const p = new URLSearchParams(location.hash.slice(1));
  const s = { ...DEFAULTS };
  for (const k of Object.keys(DEFAULTS)) if (p.has(k)) s[k] = p.get(k);
  if (!VIEWS.includes(s.view)) s.view = DEFAULTS.view;
  if (!['models', 'coverage', 'diff'].includes(s.tab)) s.tab = 'models';
  return s;
}

let state = readState();

function writeState(patch, replace) {
  state = { ...state, ...patch };
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(state)) if (v !== DEFAULTS[k] && v !== '') p.set(k, v);
  const hash = '#' + p.toString();
  if (hash === location.hash) return render();
  if (replace) {
    history.replaceState(null, '', hash);
    render();
  } else {
    location.hash = hash;  // render() runs on hashchange
  }
}

// ---- API --------------------------------------------------------------------------------

// Each render has a generation; an answer that arrives after a newer render began is dropped.
let renderGen = 0;
const stale = (gen) => gen !== renderGen;

async function api(name, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== '' && v !== undefined) q.set(k, v);
  const res = await fetch('api/' + name + '?' + q.toString());
  const body = await res.json();
  if (!res.ok) throw new Error(body.error || res.statusText);
  return body;
}

// ---- formatting -------------------------------------------------------------------------

function seconds(x) { return x === undefined || x === null ? '' : x < 10 ? x.toFixed(2) + ' s' : x.toFixed(1) + ' s'; }
function mib(bytes) { return bytes ? (bytes / 1048576).toFixed(1) + ' MiB' : ''; }
function rate(x) { return x ? x.toFixed(1) : ''; }
function params(n) {
  if (!n) return '';
  for (const [unit, size] of [['T', 1e12], ['B', 1e9], ['M', 1e6], ['K', 1e3]])
    if (n >= size) return (n / size).toFixed(n >= 10 * size ? 0 : 1) + unit;
  return String(n);
}

function fillSelect(select, options, value) {
  clear(select);
  for (const o of options) {
    const [v, label] = Array.isArray(o) ? o : [o, o];
    select.append(el('option', { value: v, text: label }));
  }
  select.value = value;
  if (select.value !== value && select.options.length) select.selectedIndex = 0;
}

// ---- copy -------------------------------------------------------------------------------

async function copyText(text, feedback) {
  let ok = false;
  try {
    await navigator.clipboard.writeText(text);
    ok = true;
  } catch (_) {
    const t = el('textarea', { class: 'offscreen', 'aria-hidden': 'true' });
    t.value = text;
    document.body.append(t);
    t.select();
    try { ok = document.execCommand('copy'); } catch (_) { ok = false; }
    t.remove();
  }
  feedback.textContent = ok ? 'Copied' : 'Copy failed: select the text and copy it';
  announce(feedback.textContent);
}

function copyBlock(title, text) {
  const feedback = el('span', { class: 'copy-feedback', role: 'status' });
  const button = el('button', { type: 'button', class: 'copy', 'aria-label': 'Copy ' + title,
    onclick: () => copyText(text, feedback) }, 'Copy');
  return el('div', { class: 'block' },
    el('div', { class: 'block-head' }, el('h3', { text: title }), button, feedback),
    el('pre', { class: 'code', text: text }));
}

// ---- controls ---------------------------------------------------------------------------

let versions = null;

async function loadVersions() {
  versions = await api('versions');
  const line = `${versions.rows} rows from ${versions.files} files` +
    (versions.errors.length ? `; ${versions.errors.length} files could not be read` : '');
  $('dataset-line').textContent = line;
  $('dataset-line').title = versions.errors.join('\n');
}

function renderControls() {
  fillSelect($('task'), versions.tasks, state.task);
  const lathe = state.lathe || versions.lathe[0] || '';
  fillSelect($('lathe'), versions.lathe.length ? versions.lathe : [['', '(no rows)']], lathe);
  fillSelect($('transformers'), [['any', 'any (latest row)'], ...versions.transformers], state.tf);
  fillSelect($('status-filter'), [['', 'any status'], ...STATUSES], state.status);
  fillSelect($('size'), SIZES, state.size);
  fillArchitectures();
  if ($('search') !== document.activeElement) $('search').value = state.q;
  for (const b of document.querySelectorAll('#views button'))
    b.setAttribute('aria-pressed', String(b.dataset.view === state.view));
  for (const b of document.querySelectorAll('nav .tab'))
    b.setAttribute('aria-pressed', String(b.dataset.tab === state.tab));
  $('views').disabled = state.tab !== 'models';
  for (const id of ['status-filter', 'arch', 'size']) $(id).disabled = state.tab !== 'models';
  $('search').disabled = state.tab === 'diff';
  // The diff has its own two version pairs.
  $('lathe').disabled = state.tab === 'diff';
  $('transformers').disabled = state.tab === 'diff';
}

// ---- the table --------------------------------------------------------------------------

const COLUMNS = [
  ['rank', 'Rank', 'rank'], ['model', 'Model', 'model'], ['arch', 'Architecture', 'architecture'],
  ['params', 'Parameters', 'params'], ['dtype', 'dtype', null], ['status', 'Status', 'status'], ['cores', 'Cores', 'cores'],
  ['time', 'Total time (incl. compile)', 'time'], ['memory', 'Peak memory', 'memory'],
  ['speed', 'Tokens/s', 'speed'],
];

function renderHead(ranked) {
  const tr = clear($('rows-head'));
  const sort = state.sort || (ranked ? 'rank' : 'model');
  for (const [key, label, sortKey] of COLUMNS) {
    if (key === 'rank' && !ranked) continue;
    const th = el('th', { scope: 'col' });
    if (sortKey) {
      const active = sort === sortKey;
      th.setAttribute('aria-sort', active ? (state.order === 'desc' ? 'descending' : 'ascending') : 'none');
      th.append(el('button', { type: 'button', class: 'sort', onclick: () => writeState({
        sort: sortKey, order: active && state.order === 'asc' ? 'desc' : 'asc', page: '0' }) },
      label, active ? (state.order === 'desc' ? ' ▼' : ' ▲') : ''));
    } else {
      th.textContent = label;
    }
    tr.append(th);
  }
}

let lastItems = [];

async function renderRows(gen) {
  const page = Math.max(0, parseInt(state.page, 10) || 0);
  const [minParams, maxParams] = (state.size || '-').split('-').map((x) => (x ? String(Number(x)) : ''));
  let data;
  try {
    data = await api('rows', { task: state.task, view: state.view, q: state.q,
      lathe: state.lathe, transformers: state.tf, status: state.status, arch: state.arch,
      min_params: minParams, max_params: maxParams, sort: state.sort,
      order: state.order, offset: page * PAGE, limit: PAGE });
  } catch (e) {
    if (!stale(gen)) $('rows-line').textContent = 'Could not load rows: ' + e.message;
    return;
  }
  if (stale(gen)) return;
  const ranked = data.ranking !== null;
  renderHead(ranked);
  const body = clear($('rows-body'));
  lastItems = data.items;
  for (const item of data.items) {
    const open = el('button', { type: 'button', class: 'model-link',
      onclick: () => writeState({ model: item.model_id, dtype: item.dtype || '', rev: item.revision || '' }) },
    item.model_id);
    const tr = el('tr', { class: item.model_id === state.model ? 'selected' : '' });
    if (ranked) tr.append(el('td', { class: 'num', text: String(item.rank ?? '') }));
    tr.append(el('td', {}, open), el('td', { text: item.architecture || '' }),
      el('td', { class: 'num', text: item.tested ? params(item.parameters) : '' }),
      el('td', { text: item.dtype || '' }), el('td', {}, badge(item.status)),
      el('td', { class: 'num', text: item.tested ? String(item.cores) : '' }),
      el('td', { class: 'num', text: item.tested ? seconds(item.total_seconds) : '' }),
      el('td', { class: 'num', text: item.tested ? mib(item.peak_memory_bytes) : '' }),
      el('td', { class: 'num', text: item.tested ? rate(item.tokens_per_second) : '' }));
    body.append(tr);
  }
  if (!data.items.length)
    body.append(el('tr', {}, el('td', { colspan: String(COLUMNS.length), class: 'muted',
      text: data.ranking_missing ? 'Nothing to list without the ranking file.' : 'No models match.' })));
  const counts = STATUSES.filter((s) => data.counts[s]).map((s) => `${data.counts[s]} ${s}`).join(', ');
  const source = ranked ? `ranking of ${data.ranking.snapshot || 'unknown date'}` : 'all rows of the dataset';
  $('rows-line').textContent = data.ranking_missing
    ? `No ${data.view} ranking for ${data.task}: the catalog folder has no ` +
      `${data.task}-${data.view}.json (lathe lab catalog refresh writes it). All rows lists what was run.`
    : `${data.total} models (${source}; lathe ${data.lathe || '-'}, ` +
      `transformers ${data.transformers})` + (counts ? ': ' + counts : '');
  const pages = Math.max(1, Math.ceil(data.total / PAGE));
  $('page-line').textContent = `page ${page + 1} of ${pages}`;
  $('prev').disabled = page === 0;
  $('next').disabled = page + 1 >= pages;
}

// ---- headline figures ------------------------------------------------------------------

const VIEW_NAMES = { selected: 'Selected', trending: 'Trending', downloads: 'Downloads' };

function figure(label, value, rest) {
  return el('div', { class: 'figure' }, el('dt', { text: label }),
    el('dd', {}, el('strong', { text: String(value) }), rest));
}

// The architecture filter lists the selection's architectures (and the URL's, if another).
let knownArchs = [];

function fillArchitectures() {
  const archs = [...knownArchs];
  if (state.arch && !archs.includes(state.arch)) archs.push(state.arch);
  fillSelect($('arch'), [['', 'any architecture'], ...archs], state.arch);
}

// A ranking's name as the page writes it: "text-generation / Selected".
function rankingName(r) { return `${r.task} / ${VIEW_NAMES[r.view] || r.view}`; }

// Above the list: how much of each ranking lathe implements and has verified (the figures
// of /api/coverage, as the report writes them), what passes in the chosen versions, how much
// of each ranking has run, and the rows' own architectures (fixture coverage on the bundled
// sweep, so not the headline).
function renderHeadline(s, cov) {
  const dl = clear($('figures'));
  if (cov) {
    const shares = el('dd', {});
    for (const r of cov.rankings)
      shares.append(el('span', { class: 'ranking', text: `${VIEW_NAMES[r.view] || r.view}: ` +
        `${r.percent.models_implemented} of ${r.models} models implemented, ` +
        `${r.percent.models_pass} verified pass` }));
    if (!cov.rankings.length) shares.append('no ranking files (lathe lab catalog refresh writes them)');
    dl.append(el('div', { class: 'figure' }, el('dt', { text: 'Rankings implemented' }), shares));
  }
  dl.append(figure('Models', s.by_status.pass, ` of ${s.rows} models pass`),
    figure("Rows' architectures", s.coverage.passing,
      ` of ${s.coverage.architectures} architectures have a passing model` +
      (cov && cov.fixtures.rows ? ` (fixture coverage: ${cov.fixtures.passing} of ` +
        `${cov.fixtures.architectures} of lathe's tiny fixtures)` : '')));
  const ranked = el('dd', {});
  for (const r of s.rankings)
    ranked.append(el('span', { class: 'ranking', text: `${VIEW_NAMES[r.view] || r.view}: ` +
      `${r.run} of ${r.models} run, ${r.passed} pass` + (r.snapshot ? ` (${r.snapshot})` : '') }));
  if (!s.rankings.length) ranked.append('no ranking files (lathe lab catalog refresh writes them)');
  dl.append(el('div', { class: 'figure' }, el('dt', { text: 'Rankings run' }), ranked),
    el('div', { class: 'figure' }, el('dt', { text: 'Versions' }),
      el('dd', { text: `lathe ${s.lathe || '-'}, transformers ${s.transformers_versions.join(', ') || '-'}` })));
}

// ---- a model's page ---------------------------------------------------------------------
// It replaces the list (state.model names it, so it has its own URL): what happened first
// (status, error, log tail), then the tokens, the measurements, how to reproduce it, the
// other runs, and the stack last.

function kv(pairs) {
  const dl = el('dl', { class: 'kv' });
  for (const [k, v] of pairs) if (v !== '' && v !== null && v !== undefined) dl.append(el('dt', { text: k }), el('dd', {}, v));
  return dl;
}

function block(title, ...children) {
  return el('div', { class: 'block' }, el('h3', { text: title }), ...children);
}

function textBlock(title, text, cls) {
  return block(title, el('pre', { class: 'code ' + cls, text: text }));
}

function tokenLine(label, tokens, mismatch) {
  const line = el('div', { class: 'tokens' }, el('span', { class: 'tokens-label', text: label }));
  if (!tokens.length) line.append(el('span', { class: 'muted', text: 'none' }));
  tokens.forEach((t, i) => {
    const cls = i === mismatch ? 'tok mismatch' : 'tok';
    const span = el('span', { class: cls, text: String(t) });
    if (i === mismatch) span.title = 'first mismatch, position ' + i;
    line.append(span);
  });
  return line;
}

// The dataset keeps token ids, not their text (docs/dataset.md): the page shows the ids and
// says so.
function tokenBlock(r) {
  const mismatch = r.first_mismatch ?? -1;
  return block('Tokens' + (mismatch >= 0 ? ` (first mismatch at position ${mismatch})` : ''),
    el('p', { class: 'muted', text: 'The dataset holds token ids only, not their text: shown as ids.' }),
    tokenLine('prompt', r.prompt_ids || [], -1), tokenLine('reference', r.reference_tokens || [], mismatch),
    tokenLine('lathe', r.generated_tokens || [], mismatch));
}

// The model's page on the Hugging Face Hub, for Hub ids of plain characters (ORG/NAME); null
// for tiny fixtures and local checkpoints.
function hubUrl(r) {
  if (r.source !== 'hub' || !/^[A-Za-z0-9][\w.-]*\/[A-Za-z0-9][\w.-]*$/.test(r.model_id)) return null;
  return 'https://huggingface.co/' + r.model_id.split('/').map(encodeURIComponent).join('/');
}

// The row's own version columns, then the stack's other components (it repeats lathe and
// transformers), each once.
function stackBlock(r) {
  const rows = [['lathe', r.lathe_version + (r.lathe_commit ? ' (' + r.lathe_commit + ')' : '')],
    ['transformers', r.transformers_version || 'none'], ['torch', r.torch_version || 'none']];
  const seen = new Set(rows.map(([k]) => k));
  for (const [k, v] of Object.entries(r.stack || {})) if (!seen.has(k)) { seen.add(k); rows.push([k, v]); }
  const table = el('table', { class: 'stack' }, el('caption', { class: 'visually-hidden', text: 'Stack' }));
  for (const [k, v] of rows) table.append(el('tr', {}, el('th', { scope: 'row', text: k }), el('td', { text: v })));
  const extra = r.extra_packages || [];
  return block('Stack', table, el('p', {}, 'Extra packages: ', extra.length ? extra.join(', ') : 'none'));
}

function historyTable(history) {
  const t = el('table', { class: 'history' }, el('caption', { text: 'Other runs of this model' }),
    el('thead', {}, el('tr', {}, ...['lathe', 'transformers', 'dtype', 'Status'].map((h) =>
      el('th', { scope: 'col', text: h })),
    el('th', { scope: 'col' }, el('span', { class: 'visually-hidden', text: 'Open' })))));
  const tbody = el('tbody');
  for (const h of history) {
    const run = `lathe ${h.lathe_version}, transformers ${h.transformers_version}, ${h.dtype}`;
    tbody.append(el('tr', {}, el('td', { text: h.lathe_version }),
      el('td', { text: h.transformers_version }), el('td', { text: h.dtype }),
      el('td', {}, badge(h.status)), el('td', {}, el('button', { type: 'button',
        'aria-label': 'Show the run of ' + run,
        onclick: () => writeState({ lathe: h.lathe_version, tf: h.transformers_version, dtype: h.dtype }) }, 'Show'))));
  }
  t.append(tbody);
  return t;
}

function modelPage(body, r, history) {
  const hub = hubUrl(r);
  body.append(el('p', { class: 'muted' },
    `${r.task}, revision ${r.revision}, ${r.dtype} on ${r.device_kind}; lathe ${r.lathe_version}, ` +
    `transformers ${r.transformers_version || 'none'}`,
    hub ? ' · ' : null,
    hub ? el('a', { class: 'hub', href: hub, rel: 'noopener noreferrer' }, 'its page on the Hugging Face Hub') : null));
  body.append(kv([
    ['Status', el('span', {}, badge(r.status), ' stage ' + r.stage)],
    ['Error', r.error_type], ['Judge', r.judge_verdict], ['Fluency', r.fluency_verdict],
  ]));
  if (r.error_message) body.append(textBlock('Error message', r.error_message, 'error'));
  if (r.log_tail) body.append(textBlock('Log tail', r.log_tail, 'log'));
  body.append(tokenBlock(r));
  body.append(block('Measurements', kv([
    ['Architecture', r.architecture], ['Parameters', params(r.parameters)],
    ['Cores', String(r.cores)], ['Total time', seconds(r.total_seconds) + ' (compile ' + seconds(r.compile_seconds) + ')'],
    ['Peak memory', mib(r.peak_memory_bytes)], ['Tokens/s', rate(r.tokens_per_second)],
    ['First diverging layer', r.first_diverging_layer ?? 'none'],
    ['Logits NMSE', r.logits_nmse === null ? '' : String(r.logits_nmse)],
    ['Top-1 agreement', r.top1_agreement === null ? '' : String(r.top1_agreement)],
    ['Finished', r.finished_at], ['Host', r.host],
  ])));
  // Only what the row holds: a box without text has no Copy button.
  if (r.run_script) body.append(copyBlock('Run script', r.run_script));
  else body.append(el('p', { class: 'muted', text: 'This row has no run script.' }));
  if (r.compile_cache_fetch) body.append(copyBlock('Compile-cache fetch', r.compile_cache_fetch));
  if (r.reference_script) body.append(copyBlock('Reference script', r.reference_script));
  if (history.length > 1) body.append(historyTable(history));
  body.append(stackBlock(r));
}

let shownModel = '';

// The page closes (Escape, its Back button): if focus was in it, or lost with a re-render,
// it goes back to the row's button that opened it, else to the results.
function closeDetail(panel) {
  const active = document.activeElement;
  const lost = !active || active === document.body || panel.contains(active);
  const was = shownModel;
  panel.hidden = true;
  shownModel = '';
  if (!was || !lost) return;
  const row = [...document.querySelectorAll('#rows-body button.model-link')]
    .find((b) => b.textContent === was);
  (row || $('main')).focus();
}

function showHeading(heading, model) {
  heading.textContent = model;
  if (shownModel !== model) {  // a new page: at its top, keyboard users on its heading
    window.scrollTo(0, 0);
    heading.focus({ preventScroll: true });
  }
  shownModel = model;
}

async function renderDetail(gen) {
  const panel = $('detail');
  if (!state.model || state.tab !== 'models') {
    if (panel.hidden) shownModel = '';
    else closeDetail(panel);
    return;
  }
  panel.hidden = false;
  const heading = $('detail-heading');
  const model = state.model;
  const listed = lastItems.find((i) => i.model_id === state.model && !i.tested);
  let data;
  try {
    data = await api('row', { model: state.model, task: state.task, dtype: state.dtype,
      revision: state.rev, lathe: state.lathe || versions.lathe[0] || '', transformers: state.tf });
  } catch (e) {
    if (stale(gen)) return;
    showHeading(heading, model);
    // A ranked model without a row: untested, or unsupported (its architecture is one lathe
    // does not implement, so it is not run).
    const why = !listed ? 'No row in this selection: ' + e.message
      : listed.status === 'unsupported' ? listed.error_message : 'Ranked, not tested yet in this selection.';
    clear($('detail-body')).append(el('p', {}, badge(listed ? listed.status : 'untested'), ' ', why));
    return;
  }
  if (stale(gen)) return;
  showHeading(heading, model);
  modelPage(clear($('detail-body')), data.row, data.history);
}

// ---- coverage ---------------------------------------------------------------------------

// Each ranking's figures as /api/coverage gives them (computed by the report's own code; the
// page only writes them out), then the architectures it lacks, most used first.
function renderRankingCoverage(cov) {
  const body = clear($('ranking-coverage-body'));
  for (const r of cov.rankings)
    body.append(el('tr', {}, el('th', { scope: 'row', text: rankingName(r) }),
      el('td', { text: r.snapshot || '' }), el('td', { class: 'num', text: String(r.models) }),
      el('td', { class: 'num', text: r.percent.models_implemented }),
      el('td', { class: 'num', text: r.percent.models_pass }),
      el('td', { class: 'num', text: String(r.architectures) }),
      el('td', { class: 'num', text: r.percent.architectures_implemented }),
      el('td', { class: 'num', text: r.percent.architectures_pass })));
  $('rankings-line').textContent = cov.rankings.length
    ? `lathe ${cov.lathe || '-'}, transformers ${cov.transformers}; a ranked model no row of these versions passes counts as not verified.`
    : `No ranking files for ${cov.task} (lathe lab catalog refresh writes them).`;
  const missing = clear($('unimplemented'));
  for (const r of cov.rankings) {
    if (!r.unimplemented.length) continue;
    const list = el('ol', { class: 'unimplemented' });
    for (const u of r.unimplemented)
      list.append(el('li', {}, el('span', { class: 'arch', text: u.architecture }),
        ` (${u.models} ranked model${u.models === 1 ? '' : 's'})`));
    missing.append(el('div', { class: 'block' },
      el('h3', { text: `Not implemented, ${rankingName(r)}, by ranked models using it` }), list));
  }
  const f = cov.fixtures;
  $('fixture-line').textContent = f.rows
    ? `Fixture coverage: ${f.passing} of ${f.architectures} architectures of lathe's own tiny ` +
      `fixtures pass (${f.percent}, ${f.rows} rows). These are lathe's test models, not the Hub's rankings.`
    : 'Fixture coverage: no rows of lathe\'s tiny fixtures in these versions.';
}

async function renderCoverage(gen) {
  let s, cov;
  try {
    [s, cov] = await Promise.all([
      api('summary', { task: state.task, lathe: state.lathe, transformers: state.tf }),
      api('coverage', { task: state.task, lathe: state.lathe, transformers: state.tf })]);
  } catch (e) { return; }
  if (stale(gen)) return;
  renderRankingCoverage(cov);
  const q = state.q.toLowerCase();
  const archs = s.architectures.filter((a) => a.architecture.toLowerCase().includes(q));
  $('coverage-line').textContent = `${s.coverage.passing} of ${s.coverage.architectures} architectures ` +
    `have a passing model (lathe ${s.lathe}, transformers ${s.transformers}, ${s.rows} models).`;
  const legend = clear($('coverage-legend'));
  for (const st of STATUSES) legend.append(badge(st));
  const chart = clear($('coverage-chart'));
  // Each bar is one architecture's models, 100%, split by status.
  for (const a of archs) {
    const bar = el('div', { class: 'bar', role: 'img' });
    const parts = [];
    for (const st of STATUSES) {
      const n = a.by_status[st] || 0;
      if (!n) continue;
      const seg = el('span', { class: 'seg badge-' + st, title: `${st}: ${n}` });
      seg.style.width = (100 * n / a.models) + '%';
      bar.append(seg);
      parts.push(`${n} ${st}`);
    }
    const pass = Math.round(100 * (a.by_status.pass || 0) / a.models);
    bar.setAttribute('aria-label', `${pass}% pass: ` + parts.join(', '));
    chart.append(el('div', { class: 'bar-row' },
      el('span', { class: 'bar-label', text: a.architecture }), bar,
      el('span', { class: 'bar-count', text: `${pass}% pass (${parts.join(', ')})` })));
  }
}

// ---- diff -------------------------------------------------------------------------------

function diffTable(title, list, total, paired) {
  const wrap = el('div', { class: 'block' }, el('h3', { text: `${title} (${total})` }));
  if (!list.length) { wrap.append(el('p', { class: 'muted', text: 'none' })); return wrap; }
  const t = el('table', { class: 'diff' });
  t.append(el('thead', {}, el('tr', {}, ...['Model', 'Architecture', paired ? 'A → B' : 'Status',
    'Error'].map((h) => el('th', { scope: 'col', text: h })))));
  const tbody = el('tbody');
  for (const d of list) {
    const a = paired ? d.a : d, b = paired ? d.b : d;
    const open = el('button', { type: 'button', class: 'model-link', onclick: () => writeState({
      tab: 'models', lathe: state.b, tf: state.btf, model: b.model_id, dtype: b.dtype, rev: b.revision }) }, b.model_id);
    tbody.append(el('tr', {}, el('td', {}, open), el('td', { text: b.architecture }),
      el('td', {}, paired ? el('span', {}, badge(a.status), ' → ', badge(b.status)) : badge(b.status)),
      el('td', { text: b.error_message || '' })));
  }
  t.append(tbody);
  wrap.append(t);
  return wrap;
}

async function renderDiff(gen) {
  const lv = versions.lathe, tv = [['any', 'any'], ...versions.transformers];
  const a = state.a || lv[1] || lv[0] || '', b = state.b || lv[0] || '';
  fillSelect($('diff-a-lathe'), lv, a);
  fillSelect($('diff-b-lathe'), lv, b);
  fillSelect($('diff-a-tf'), tv, state.atf);
  fillSelect($('diff-b-tf'), tv, state.btf);
  if (a === b && state.atf === state.btf) {
    const tfs = versions.transformers.filter((t) => t !== 'none');
    const hint = lv.length > 1 ? 'Pick two different versions.'
      : tfs.length > 1 ? 'Pick two transformers versions, or add the results of another lathe version.'
        : 'Add the results of another lathe or transformers version.';
    $('diff-line').textContent = (lv.length < 2 ? `The data holds one lathe version (${a || 'none'}): ` : '') +
      `A and B are the same versions (lathe ${a || '-'}, transformers ${state.atf}): nothing to compare. ` + hint;
    clear($('diff-body'));
    return;
  }
  let d;
  try {
    d = await api('diff', { task: state.task, a_lathe: a, a_transformers: state.atf,
      b_lathe: b, b_transformers: state.btf, limit: 500 });
  } catch (e) { if (!stale(gen)) $('diff-line').textContent = 'Could not load the diff: ' + e.message; return; }
  if (stale(gen)) return;
  $('diff-line').textContent = `A = lathe ${d.a.lathe} / transformers ${d.a.transformers}; ` +
    `B = lathe ${d.b.lathe} / transformers ${d.b.transformers}: ${d.regressions_total} regressions, ` +
    `${d.fixes_total} fixes, ${d.unchanged} unchanged.`;
  clear($('diff-body')).append(
    diffTable('Regressions (pass in A, not in B)', d.regressions, d.regressions_total, true),
    diffTable('Fixes (pass in B, not in A)', d.fixes, d.fixes_total, true),
    diffTable('Only in A', d.only_in_a, d.only_in_a_total, false),
    diffTable('Only in B', d.only_in_b, d.only_in_b_total, false));
}

// ---- wiring -----------------------------------------------------------------------------

async function render() {
  const gen = ++renderGen;
  state = readState();
  try { await loadVersions(); } catch (e) { if (!stale(gen)) $('dataset-line').textContent = 'Cannot reach the server: ' + e.message; return; }
  if (stale(gen)) return;
  renderControls();
  $('models-view').hidden = state.tab !== 'models' || Boolean(state.model);
  $('coverage-view').hidden = state.tab !== 'coverage';
  $('diff-view').hidden = state.tab !== 'diff';
  $('headline').hidden = state.tab !== 'models' || Boolean(state.model);
  if (state.tab === 'models') {
    const sel = { task: state.task, lathe: state.lathe, transformers: state.tf };
    const [s, cov] = await Promise.all([api('summary', sel).catch(() => null),
      api('coverage', sel).catch(() => null)]);  // on failure the rows say why
    if (stale(gen)) return;
    if (s) {
      knownArchs = s.architectures.map((a) => a.architecture);
      fillArchitectures();
      if (!state.model) renderHeadline(s, cov);
    }
    await renderRows(gen);
    await renderDetail(gen);
  }
  else $('detail').hidden = true;
  if (state.tab === 'coverage') await renderCoverage(gen);
  if (state.tab === 'diff') await renderDiff(gen);
  if (!stale(gen)) document.body.dataset.ready = String(gen);
}

function init() {
  for (const b of document.querySelectorAll('nav .tab')) b.addEventListener('click', () => writeState({ tab: b.dataset.tab }));
  for (const b of document.querySelectorAll('#views button'))
    b.addEventListener('click', () => writeState({ view: b.dataset.view, page: '0', sort: '', model: '' }));
  $('task').addEventListener('change', (e) => writeState({ task: e.target.value, page: '0', model: '' }));
  $('lathe').addEventListener('change', (e) => writeState({ lathe: e.target.value, page: '0' }));
  $('transformers').addEventListener('change', (e) => writeState({ tf: e.target.value, page: '0' }));
  // Choosing rows goes back from a model's page to the list.
  $('status-filter').addEventListener('change', (e) => writeState({ status: e.target.value, page: '0', model: '' }));
  $('arch').addEventListener('change', (e) => writeState({ arch: e.target.value, page: '0', model: '' }));
  $('size').addEventListener('change', (e) => writeState({ size: e.target.value, page: '0', model: '' }));
  $('search').addEventListener('input', (e) => writeState({ q: e.target.value, page: '0', model: '' }, true));
  $('controls').addEventListener('submit', (e) => e.preventDefault());
  $('prev').addEventListener('click', () => writeState({ page: String(Math.max(0, (parseInt(state.page, 10) || 0) - 1)) }));
  $('next').addEventListener('click', () => writeState({ page: String((parseInt(state.page, 10) || 0) + 1) }));
  $('close-detail').addEventListener('click', () => writeState({ model: '', dtype: '', rev: '' }));
  $('diff-a-lathe').addEventListener('change', (e) => writeState({ a: e.target.value }));
  $('diff-b-lathe').addEventListener('change', (e) => writeState({ b: e.target.value }));
  $('diff-a-tf').addEventListener('change', (e) => writeState({ atf: e.target.value }));
  $('diff-b-tf').addEventListener('change', (e) => writeState({ btf: e.target.value }));
  document.addEventListener('keydown', (e) => {
    const typing = ['INPUT', 'SELECT', 'TEXTAREA'].includes(document.activeElement.tagName);
    if (e.key === '/' && !typing) { e.preventDefault(); $('search').focus(); }
    if (e.key === 'Escape' && state.model) writeState({ model: '', dtype: '', rev: '' });
  });
  window.addEventListener('hashchange', render);
  render();
}

document.addEventListener('DOMContentLoaded', init);
