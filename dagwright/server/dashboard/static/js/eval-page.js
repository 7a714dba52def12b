// One eval's page: its facts, the cases-by-scorers table and, with `?baseline=<id>`, the
// comparison with that earlier eval (chosen from the suite's earlier evals in a select).
// While the eval runs, the page reads it again every few seconds, keeping open what the
// visitor opened.

import { getJson } from "./api.js";
import { age, el, reported } from "./dom.js";
import { comparisonView } from "./eval-compare.js";
import { fillMatrix } from "./eval-table.js";
import { durationOf, gradesPassed, percent, seconds, usd } from "./eval-format.js";

const evalId = document.body.dataset.evalId;
const evalPath = `/api/v1/evals/${encodeURIComponent(evalId)}`;
const baselineId = new URLSearchParams(location.search).get("baseline");
const select = document.getElementById("baseline");
const REFRESH_MS = 5000;
let baselinesListed = false;

function header(report) {
  const { record, judge } = report;
  const status = document.getElementById("eval-status");
  status.textContent = record.status;
  status.className = `badge st-${record.status}`;
  const suiteLink = el("a", { href: `/evals?suite=${encodeURIComponent(record.suite)}` }, record.suite);
  const file = record.suite_file ? ` (${record.suite_file})` : "";
  const baseline = record.baseline ? baselineNote(record.baseline) : [];
  document.getElementById("eval-suite").replaceChildren("Suite ", suiteLink, el("span", { class: "muted" }, file), ...baseline);
  const changes = Object.entries(record.changes || {}).map(([k, v]) => `${k} ${JSON.stringify(v)}`);
  document.getElementById("eval-facts").textContent =
    `started ${age(record.started_at)} ago · ${seconds(durationOf(record))} · ${record.cases.length} cases` +
    ` × ${record.repeat} ${record.repeat > 1 ? "repeats" : "repeat"} · ${percent(gradesPassed(report.results))}` +
    ` of grades passed · runs ${usd(report.cost_usd)}` +
    (judge.asked + judge.cached
      ? ` · judge ${usd(judge.cost_usd)}: ${judge.asked} asked, ${judge.cached} from its cache`
      : "") +
    (changes.length ? ` · changed: ${changes.join(", ")}` : "");
}

/** The baseline the eval was run against: a link to the comparison when it is an eval. */
function baselineNote(baseline) {
  if (!baseline.startsWith("ev_")) return [` · run against the baseline file ${baseline}`];
  const href = `${location.pathname}?${new URLSearchParams({ baseline })}`;
  return [" · run against ", el("a", { href, id: "run-baseline" }, baseline)];
}

async function fillBaselines(record) {
  const params = new URLSearchParams({ suite: record.suite, limit: "100" });
  const evals = (await reported(() => getJson(`/api/v1/evals?${params}`))) || [];
  const earlier = evals.filter((e) => e.id !== record.id && e.started_at < record.started_at);
  select.append(
    ...earlier.map((e) =>
      el("option", { value: e.id, selected: e.id === baselineId }, `${e.id} · ${age(e.started_at)} ago · ${percent(e.pass_rate)}`),
    ),
  );
  if (baselineId && !earlier.some((e) => e.id === baselineId)) {
    select.append(el("option", { value: baselineId, selected: true }, baselineId));
  }
  select.addEventListener("change", () => {
    const query = select.value ? `?${new URLSearchParams({ baseline: select.value })}` : "";
    location.assign(`${location.pathname}${query}`);
  });
}

async function comparison() {
  if (!baselineId) return null;
  const params = new URLSearchParams({ baseline: baselineId });
  const found = await reported(() => getJson(`${evalPath}/compare?${params}`));
  if (!found) return null;
  const section = document.getElementById("comparison");
  section.replaceChildren(...comparisonView(found).flat());
  section.hidden = false;
  return found;
}

/** Which <details> are open, by their `data-key`: a refresh rebuilds them. */
function openedDetails() {
  return new Map([...document.querySelectorAll("details[data-key]")].map((d) => [d.dataset.key, d.open]));
}

function reopen(opened) {
  for (const details of document.querySelectorAll("details[data-key]")) {
    if (opened.has(details.dataset.key)) details.open = opened.get(details.dataset.key);
  }
}

async function load() {
  const report = await reported(() => getJson(evalPath));
  if (!report) return;
  const opened = openedDetails();
  header(report);
  const listing = baselinesListed ? null : fillBaselines(report.record);
  baselinesListed = true;
  const [compared] = await Promise.all([comparison(), listing]);
  const worse = new Map((compared ? compared.cases : []).map((c) => [c.case, new Set(c.worse)]));
  fillMatrix(document.getElementById("matrix"), report, (name) => worse.get(name) || new Set());
  reopen(opened);
  document.body.dataset.loaded = "yes";
  document.body.dataset.evalStatus = report.record.status;
  if (report.record.status === "running") setTimeout(load, REFRESH_MS);
}

load();
