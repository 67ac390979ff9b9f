// The panel's start: who is logged in (the session cookie), the login form, the views and
// the connection's state shown plainly.

import { AlarmKpis } from './alarm_kpis.js';
import { Alarms } from './alarms.js';
import { Assistant } from './assistant.js';
import { Connection } from './connection.js';
import { byId, say } from './dom.js';
import { Overview } from './overview.js';
import { Plant } from './plant.js';
import { Proposals } from './proposals.js';
import { TagDetail } from './tag_detail.js';
import { Trend } from './trend.js';
import { Writes } from './writes.js';

const VIEWS = ['overview', 'plant', 'alarms', 'kpis', 'proposals', 'assistant'];

/** POSTs JSON to the panel's login API; resolves with {ok, status, body}. */
async function post(path, body) {
  const response = await fetch(path, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'same-origin',
  });
  const text = await response.text();
  let parsed = {};
  try {
    parsed = text ? JSON.parse(text) : {};
  } catch {
    parsed = { error: text };
  }
  return { ok: response.ok, status: response.status, body: parsed };
}

function showView(name) {
  for (const view of VIEWS) {
    const tab = byId(`tab-${view}`);
    const selected = view === name;
    tab.setAttribute('aria-selected', String(selected));
    tab.tabIndex = selected ? 0 : -1;
    byId(`view-${view}`).hidden = !selected;
  }
  window.scrollTo(0, 0);
  if (name === 'alarms') alarms.loadHistory();
  if (name === 'kpis') kpis.load();
  if (name === 'proposals') proposals.refresh();
  if (name === 'assistant') {
    assistant.offerExamples();
    byId('ask-input').focus();
  }
}

function setLinkState(state, detail) {
  const line = byId('link-state');
  const banner = byId('connection-banner');
  document.body.dataset.link = state;
  clearTimeout(setLinkState.timer);
  switch (state) {
    case 'online':
      plant.setLive(true);
      line.textContent = 'Connected';
      if (detail) {
        banner.className = 'connection-banner back';
        say(banner, 'Connection restored: values are live again.');
        setLinkState.timer = setTimeout(() => { banner.hidden = true; }, 5000);
      } else {
        banner.hidden = true;
      }
      break;
    case 'lost':
      plant.setLive(false);
      line.textContent = 'Disconnected';
      banner.className = 'connection-banner lost';
      say(banner, 'Connection lost, reconnecting… Values shown are the last received and are not live.');
      break;
    case 'connecting':
      line.textContent = 'Connecting…';
      break;
    default:
      line.textContent = detail ? `Server: ${detail}` : state;
  }
}

const connection = new Connection({
  onState: setLinkState,
  onLoggedOut: (reason) => showLogin(reason || 'Your session has ended; log in again.'),
  onReady: (again) => startViews(again),
});
const alarms = new Alarms(connection, { showView });
const kpis = new AlarmKpis(connection);
/** The numeric tags the page knows (browsed in the tree, or on the overview), as pens to add. */
function numericTags() {
  const known = new Map();
  for (const node of [...plant.nodes.values(), ...overview.nodes()]) {
    if (node.dataType === 'number' || node.dataType === 'integer') known.set(node.tag, node);
  }
  return [...known.values()];
}
const trend = new Trend(connection, { candidates: numericTags });
const plant = new Plant(connection, {
  onWrite: (node) => writes.open(node),
  onTrend: (node) => trend.open(node),
  onReading: (reading) => writes.reading(reading),
});
plant.onAlarms = (states) => alarms.applyStates(states);
const writes = new Writes(connection, plant);
const overview = new Overview(connection, {
  alarms,
  // A tag's detail: its folder in the plant tree with its row marked, what it is, its
  // alarms and documents, and (numbers) its trend.
  openTag: async (node, folder) => {
    showView('plant');
    const path = folder ?? node.path.slice(0, node.path.lastIndexOf('/'));
    await plant.open(path);
    if (!node) return;
    detail.show(node);
    const row = plant.rows.get(node.tag)?.row;
    if (node.dataType === 'number' || node.dataType === 'integer') trend.open(node, { scroll: false });
    byId('tag-detail').scrollIntoView({ block: 'start' });
    row?.querySelector('button')?.focus({ preventScroll: true });
  },
});
const detail = new TagDetail(connection, alarms);
alarms.onRender = () => {
  overview.countAlarms();
  detail.showAlarms();
};
const proposals = new Proposals(connection, { unitsOf: (tag) => plant.units(tag) });
/** Questions about this plant as it stands: its most urgent alarm, an equipment, a value. */
function plantQuestions() {
  const questions = [];
  const top = alarms.active()[0];
  if (top) questions.push(`What should I do about ${alarms.messageOf(top.name)}?`);
  const { equipment, values } = overview.subjects();
  if (equipment[0]) questions.push(`What is wrong with ${equipment[0]}?`);
  if (values[0]) questions.push(`How did the ${values[0].replace(/^./, (c) => c.toLowerCase())} change over the last hour?`);
  if (!top) questions.push('Which alarms were active today?');
  return questions;
}
const assistant = new Assistant(connection, proposals, { examples: plantQuestions });

async function startViews(again) {
  // The overview first: it is the landing page, and its values are the first an operator reads.
  await (again ? overview.restart() : overview.open(''));
  await plant.start();
  if (again) trend.restart();
  await alarms.refresh();
  await proposals.start();
}

function showLogin(message) {
  connection.close();
  byId('app').hidden = true;
  byId('who').hidden = true;
  byId('login').hidden = false;
  say(byId('login-error'), message ?? '');
  setLinkState('signed-out', 'not logged in');
  byId('link-state').textContent = 'Not logged in';
  byId('login-user').focus();
}

function showApp(me) {
  byId('login').hidden = true;
  byId('app').hidden = false;
  byId('who').hidden = false;
  byId('who-name').textContent = me.user;
  byId('who-role').textContent = `${me.role} role`;
  document.body.dataset.role = me.role;
  setLinkState('connecting');
  connection.open();
}

byId('login-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const submit = byId('login-submit');
  submit.disabled = true;
  say(byId('login-error'), '');
  try {
    const reply = await post('/api/login', { user: byId('login-user').value, password: byId('login-password').value });
    byId('login-password').value = '';
    if (reply.ok) showApp(reply.body);
    else say(byId('login-error'), reply.body.error || `Login refused (HTTP ${reply.status}).`);
  } catch {
    say(byId('login-error'), 'The server cannot be reached.');
  } finally {
    submit.disabled = false;
  }
});

byId('logout').addEventListener('click', async () => {
  connection.close();
  await post('/api/logout').catch(() => {});
  alarms.clear();
  proposals.clear();
  showLogin('Logged out.');
});

const tabs = byId('tab-plant').parentElement;
tabs.addEventListener('click', (event) => {
  const tab = event.target.closest('[role="tab"]');
  if (tab) showView(tab.id.slice(4));
});
tabs.addEventListener('keydown', (event) => {
  // From the tab that has the focus (the selected one, unless the focus was put elsewhere).
  const focused = event.target.closest('[role="tab"]');
  const index = VIEWS.indexOf(focused ? focused.id.slice(4) : VIEWS[0]);
  const step = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
  if (step === undefined) return;
  const next = VIEWS[(index + step + VIEWS.length) % VIEWS.length];
  showView(next);
  byId(`tab-${next}`).focus();
});

async function start() {
  try {
    // 200: who is logged in; 204: nobody yet (a first visit); 401: the login ended.
    const response = await fetch('/api/me', { credentials: 'same-origin' });
    if (response.status === 200) showApp(await response.json());
    else showLogin();
  } catch {
    showLogin('The server cannot be reached; trying again…');
    setTimeout(start, 5000);
  }
}

start();
