// Drives Debian's headless Chromium (playwright-core, no downloaded browsers) against a
// running coordinator's dashboard and checks it against the CLI's view of the same campaigns.
//
//   node dashboard.mjs --url http://127.0.0.1:PORT --out DIR --expect-json FILE
//                      [--token TOKEN] [--chromium /usr/bin/chromium]
//
// FILE (written by tests/e2e/dashboard_e2e_test.cc):
//   { "campaign": <tailor status ID --json>, "report": <tailor report ID --json>,
//     "waiting": <tailor status ID2 --json of a campaign stuck in the queue>,
//     "waiting_device_kind": "...", "agent_name": "..." }
// Screenshots (overview.png, campaign.png, campaign-nojs.png) and result.json go to DIR.
// Exit status 0 when every check passed; each failed check is printed.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';

function parseArgs(argv) {
  const args = { chromium: '/usr/bin/chromium', token: '' };
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '').replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    args[key] = argv[i + 1];
  }
  for (const required of ['url', 'out', 'expectJson']) {
    if (!args[required]) {
      console.error(`missing --${required}`);
      process.exit(2);
    }
  }
  return args;
}

const args = parseArgs(process.argv.slice(2));
const expect = JSON.parse(readFileSync(args.expectJson, 'utf8'));
mkdirSync(args.out, { recursive: true });
const failures = [];
const checks = [];
function check(ok, what) {
  checks.push({ ok: Boolean(ok), what });
  if (!ok) failures.push(what);
}
const near = (a, b) => Math.abs(Number(a) - Number(b)) <= 1e-9 * Math.max(1, Math.abs(Number(b)));

// Polls `fn` in the page until it returns true. Not page.waitForFunction: that evaluates a
// string in the page, which the dashboard's Content-Security-Policy (no 'unsafe-eval') blocks.
async function waitUntil(page, fn, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await page.evaluate(fn)) return true;
    await new Promise((r) => setTimeout(r, 200));
  }
  return false;
}

async function text(page, selector) {
  const el = await page.$(selector);
  return el ? (await el.textContent()).trim() : null;
}
async function attr(page, selector, name) {
  const el = await page.$(selector);
  return el ? el.getAttribute(name) : null;
}

// Non-transparent pixels of a canvas: Chart.js draws axes, grid and data; an undrawn canvas
// is all transparent (its white background is CSS, not pixels).
async function drawnPixels(page, id) {
  return page.evaluate((canvasId) => {
    const c = document.getElementById(canvasId);
    if (!c || c.width === 0 || c.height === 0) return 0;
    const data = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 3; i < data.length; i += 4) if (data[i] > 0) n += 1;
    return n;
  }, id);
}

const launchArgs = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic',
  '--no-first-run', '--disable-background-networking', '--disable-component-update',
  '--disable-sync'];
let browser;
try {
  // Playwright gives every launch a fresh temporary profile (--user-data-dir).
  browser = await chromium.launch({ executablePath: args.chromium, headless: true, args: launchArgs });
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  const page = await context.newPage();
  page.setDefaultTimeout(20000);
  const consoleErrors = [];
  // The expected 401 before the login and a missing favicon are logged as resource errors.
  page.on('console', (m) => {
    if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) consoleErrors.push(m.text());
  });
  page.on('pageerror', (e) => consoleErrors.push(String(e)));

  // --- the token: through the login form, as a person would ---
  if (args.token) {
    const denied = await page.goto(`${args.url}/`);
    check(denied.status() === 401, `without a token / is 401 (got ${denied.status()})`);
    await page.fill('input[name=token]', args.token);
    await Promise.all([page.waitForNavigation(), page.click('form#login button[type=submit]')]);
  } else {
    await page.goto(`${args.url}/`);
  }
  check(await page.$('#queue-summary'), 'the overview renders the queue');

  // --- overview: queue, agents, campaigns ---
  const waiting = expect.waiting;
  const kind = expect.waiting_device_kind;
  const runnable = waiting.jobs.filter((j) => j.state === 'JOB_RUNNABLE').length;
  const shownRunnable = await text(page, `#queue-summary tr[data-device-kind="${kind}"] [data-field=runnable]`);
  check(Number(shownRunnable) === runnable,
    `queue summary: ${kind} runnable ${shownRunnable} == status ${runnable}`);
  for (const job of waiting.jobs.filter((j) => j.state === 'JOB_RUNNABLE')) {
    const reason = await text(page, `#queue-entries tr[data-job-id="${job.id}"] [data-field=reason]`);
    check(reason === job.waiting_reason, `queue entry ${job.id} reason "${reason}" == "${job.waiting_reason}"`);
  }
  const agentState = await page.$$eval('#agents tr[data-agent-id]', (rows, name) => rows
    .filter((r) => r.querySelector('[data-field=name]').textContent.trim() === name)
    .map((r) => r.querySelector('[data-field=state]').textContent.trim()), expect.agent_name);
  check(agentState.length === 1 && agentState[0] === 'AGENT_ONLINE',
    `agent ${expect.agent_name} is listed online (${agentState})`);
  for (const c of [expect.campaign, waiting]) {
    const state = await text(page, `#campaigns tr[data-campaign-id="${c.id}"] [data-field=state]`);
    check(state === c.state, `campaign list: ${c.id} state ${state} == ${c.state}`);
    const done = c.jobs.filter((j) => j.state === 'JOB_SUCCEEDED' || j.state === 'JOB_SKIPPED').length;
    const shownDone = await text(page, `#campaigns tr[data-campaign-id="${c.id}"] [data-field=jobs_done]`);
    check(shownDone === `${done}/${c.jobs.length}`, `campaign list: ${c.id} jobs done ${shownDone} == ${done}/${c.jobs.length}`);
  }
  // Auto-refresh: the script swaps #live in place (no navigation).
  const refreshed = await waitUntil(page, () => Number(document.body.dataset.refreshCount || 0) >= 1, 15000);
  check(refreshed, 'the overview refreshed itself in place');
  check(await page.$('#queue-summary'), 'the refreshed overview still has the queue');
  await page.screenshot({ path: path.join(args.out, 'overview.png'), fullPage: true });

  // --- campaign page: job graph, report, cost table, charts ---
  const c = expect.campaign;
  await page.goto(`${args.url}/campaigns/${c.id}`);
  check((await text(page, '#campaign-summary [data-field=state]')) === c.state, `campaign page: state ${c.state}`);
  check((await text(page, 'h2 [data-field=name]')) === c.name, `campaign page: name ${c.name}`);
  check((await page.$$('#jobs tr[data-job-key]')).length === c.jobs.length,
    `campaign page: ${c.jobs.length} jobs in the graph`);
  for (const job of c.jobs) {
    const row = `#jobs tr[data-job-key="${job.key}"]`;
    const state = await text(page, `${row} [data-field=state]`);
    check(state === job.state, `job ${job.key}: state ${state} == ${job.state}`);
    const attempt = await attr(page, `${row} [data-field=attempt]`, 'data-value');
    check(Number(attempt) === Number(job.attempt || 0), `job ${job.key}: attempt ${attempt} == ${job.attempt}`);
    const fraction = await attr(page, `${row} [data-field=progress]`, 'data-value');
    check(near(fraction, job.progress ? job.progress.fraction || 0 : 0),
      `job ${job.key}: progress ${fraction} == ${job.progress && job.progress.fraction}`);
  }
  const report = expect.report;
  check(report.budgets.length > 0, 'the report has budgets');
  for (const b of report.budgets) {
    const row = `#budgets tr[data-resource="${b.resource}"]`;
    for (const field of ['budget', 'predicted'].concat(b.has_measured ? ['measured'] : [])) {
      const v = await attr(page, `${row} [data-field=${field}]`, 'data-value');
      check(v !== null && near(v, b[field]), `budget ${b.resource}: ${field} ${v} == ${b[field]}`);
    }
    const met = await text(page, `${row} [data-field=met]`);
    check(met === (b.has_measured ? (b.met ? 'yes' : 'no') : 'not measured'), `budget ${b.resource}: met ${met}`);
  }
  for (const q of report.quality) {
    const row = `#quality tr[data-model="${q.model}"]`;
    const kd = await attr(page, `${row} [data-field=kd_loss]`, 'data-value');
    check(kd !== null && near(kd, q.kd_loss), `quality ${q.model}: kd_loss ${kd} == ${q.kd_loss}`);
    const params = await attr(page, `${row} [data-field=parameters]`, 'data-value');
    check(Number(params) === Number(q.parameters), `quality ${q.model}: parameters ${params} == ${q.parameters}`);
  }
  const costRows = (await page.$$('#cost-entries tbody tr')).length;
  check(costRows > 0, `the per-layer cost table has ${costRows} rows`);
  check((await page.$$('#curves table.curve[data-job-key="search"] tbody tr')).length > 0,
    'the search curve table has steps');

  const drawn = await waitUntil(page, () => {
    const d = document.body.dataset.chartsDrawn || '';
    return d.includes('costs') && d.includes('loss') && d.includes('cost-curve');
  }, 15000);
  check(drawn, `the charts were drawn (${await page.evaluate(() => document.body.dataset.chartsDrawn)})`);
  const pixels = {};
  for (const id of ['chart-costs', 'chart-loss', 'chart-cost-curve']) {
    pixels[id] = await drawnPixels(page, id);
    check(pixels[id] > 1000, `canvas ${id} has drawn pixels (${pixels[id]})`);
  }
  await page.screenshot({ path: path.join(args.out, 'campaign.png'), fullPage: true });
  check(consoleErrors.length === 0, `no script errors (${consoleErrors.join('; ')})`);

  // --- without JavaScript: the same tables, no charts ---
  const nojs = await browser.newContext({ javaScriptEnabled: false, viewport: { width: 1400, height: 1000 } });
  const plainPage = await nojs.newPage();
  if (args.token) {
    await plainPage.goto(`${args.url}/login`);
    await plainPage.fill('input[name=token]', args.token);
    await Promise.all([plainPage.waitForNavigation(), plainPage.click('form#login button[type=submit]')]);
  }
  await plainPage.goto(`${args.url}/campaigns/${c.id}`);
  check((await plainPage.$$('#jobs tr[data-job-key]')).length === c.jobs.length,
    'without JavaScript the job graph table renders');
  check((await plainPage.$$('#cost-entries tbody tr')).length === costRows,
    'without JavaScript the cost table renders');
  check(await plainPage.$eval('#charts', (el) => el.hidden), 'without JavaScript the chart section stays hidden');
  await plainPage.screenshot({ path: path.join(args.out, 'campaign-nojs.png'), fullPage: true });
  writeFileSync(path.join(args.out, 'result.json'), JSON.stringify({ checks, pixels }, null, 2));
} catch (err) {
  failures.push(`browser error: ${err && err.stack ? err.stack : err}`);
} finally {
  if (browser) await browser.close().catch(() => {});
}

console.log(`${checks.length - failures.length}/${checks.length} checks passed`);
for (const f of failures) console.log(`FAIL: ${f}`);
process.exit(failures.length === 0 ? 0 : 1);
