// The dashboard's enhancements over the server-rendered tables: the element with id "live"
// is refreshed in place every data-refresh-ms (the same page with ?partial=1, so the markup
// has one source: coordinator/http/pages.cc), and the campaign page's charts are drawn on
// <canvas> from /api/campaigns/ID/charts. Without JavaScript the page is the plain tables.
import {
  BarController,
  BarElement,
  CategoryScale,
  Chart,
  Legend,
  LinearScale,
  LineController,
  LineElement,
  PointElement,
  Tooltip,
} from 'chart.js';

Chart.register(BarController, BarElement, CategoryScale, Legend, LinearScale, LineController,
  LineElement, PointElement, Tooltip);

const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b'];
const body = document.body;
const refreshMs = Number(body.dataset.refreshMs) || 2000;
const live = document.getElementById('live');
const chartsSection = document.getElementById('charts');
const charts = {};
let refreshes = 0;

async function refreshLive() {
  if (!live) return;
  const url = new URL(window.location.href);
  url.searchParams.set('partial', '1');
  const res = await fetch(url, { credentials: 'same-origin', cache: 'no-store' });
  if (res.status === 401) {
    window.location.reload();  // the session ended: show the login form
    return;
  }
  if (!res.ok) return;
  const html = await res.text();
  // Folded sections the reader opened stay open across the swap.
  const open = [...live.querySelectorAll('details[open][id]')].map((d) => d.id);
  // Markup from this server, escaped there; the CSP forbids inline scripts besides.
  live.innerHTML = html;
  for (const id of open) {
    const d = document.getElementById(id);
    if (d) d.open = true;
  }
  refreshes += 1;
  body.dataset.refreshCount = String(refreshes);
}

// Creates the chart on first use, then swaps its data (no animation: redrawn every refresh).
function draw(id, type, data, options) {
  const canvas = document.getElementById(id);
  if (!canvas) return false;
  if (charts[id]) {
    charts[id].data = data;
    charts[id].update('none');
  } else {
    charts[id] = new Chart(canvas, {
      type,
      data,
      options: { animation: false, responsive: false, ...options },
    });
  }
  canvas.closest('figure').hidden = false;
  return true;
}

function hide(id) {
  const canvas = document.getElementById(id);
  if (canvas) canvas.closest('figure').hidden = true;
}

function drawCosts(table) {
  if (!table || table.entries.length === 0) return hide('chart-costs'), false;
  const labels = [];
  const byPhase = { prefill: new Map(), decode: new Map() };
  for (const e of table.entries) {
    const label = `${e.layer_kind} ${e.config}`;
    if (!labels.includes(label)) labels.push(label);
    if (byPhase[e.phase]) byPhase[e.phase].set(label, e.time_ms);
  }
  const datasets = Object.entries(byPhase).map(([phase, values], i) => ({
    label: `${phase} (ms)`,
    data: labels.map((l) => (values.has(l) ? values.get(l) : null)),
    backgroundColor: COLORS[i],
  }));
  return draw('chart-costs', 'bar', { labels, datasets }, {
    scales: { y: { title: { display: true, text: 'time per layer (ms)' } } },
  });
}

function series(points, key, i, axis) {
  if (!points.some((p) => key in p.metrics)) return null;
  return {
    label: key,
    data: points.map((p) => (key in p.metrics ? p.metrics[key] : null)),
    borderColor: COLORS[i % COLORS.length],
    backgroundColor: COLORS[i % COLORS.length],
    yAxisID: axis,
    pointRadius: 2,
    spanGaps: true,
  };
}

function drawCurves(curves) {
  const search = curves.find((c) => c.job_kind === 'search');
  if (!search || search.points.length === 0) {
    hide('chart-loss');
    hide('chart-cost-curve');
    return [];
  }
  const labels = search.points.map((p) => p.step);
  const drawn = [];
  const loss = [series(search.points, 'kd_loss', 0, 'y'), series(search.points, 'penalty', 1, 'y1')]
    .filter(Boolean);
  if (loss.length && draw('chart-loss', 'line', { labels, datasets: loss }, {
    scales: {
      x: { title: { display: true, text: 'step' } },
      y: { title: { display: true, text: 'kd loss' } },
      y1: { position: 'right', title: { display: true, text: 'budget penalty' },
        grid: { drawOnChartArea: false } },
    },
  })) drawn.push('loss');
  const cost = [
    series(search.points, 'predicted_latency_ms', 0, 'y'),
    series(search.points, 'budget_latency_ms', 3, 'y'),
    series(search.points, 'predicted_memory_mib', 2, 'y1'),
    series(search.points, 'budget_memory_mib', 4, 'y1'),
  ].filter(Boolean);
  for (const d of cost) if (d.label.startsWith('budget')) d.borderDash = [6, 4];
  if (cost.length && draw('chart-cost-curve', 'line', { labels, datasets: cost }, {
    scales: {
      x: { title: { display: true, text: 'step' } },
      y: { title: { display: true, text: 'latency (ms)' } },
      y1: { position: 'right', title: { display: true, text: 'memory (MiB)' },
        grid: { drawOnChartArea: false } },
    },
  })) drawn.push('cost-curve');
  return drawn;
}

async function refreshCharts() {
  if (!chartsSection) return;
  const res = await fetch(chartsSection.dataset.src, { credentials: 'same-origin', cache: 'no-store' });
  if (!res.ok) return;
  const data = await res.json();
  chartsSection.hidden = false;
  const drawn = [];
  if (drawCosts(data.cost_table)) drawn.push('costs');
  drawn.push(...drawCurves(data.curves));
  body.dataset.chartsDrawn = drawn.join(',');
}

async function tick() {
  try {
    await refreshLive();
    await refreshCharts();
  } catch (err) {
    console.warn('dashboard refresh failed', err);  // the coordinator restarting, say
  } finally {
    window.setTimeout(tick, refreshMs);
  }
}

refreshCharts().catch((err) => console.warn('charts', err));
window.setTimeout(tick, refreshMs);
