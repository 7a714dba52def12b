// The run page's scores: feedback given on the run (by the API, the CLI, the client, an
// eval, or the form here), read again whenever the page reads its run, and every
// POLL_MS while the page is shown (a score given to an ended run sends no event).
// Names, comments and authors are anyone's text: they go in as text nodes (dom.js `el`).

import { getJson, postJson } from "./api.js";
import { el, flash, mayOperate, reported } from "./dom.js";
import { ageElement } from "./times.js";

const POLL_MS = 10000;
const TRUE_WORDS = new Set(["true", "yes", "pass"]);
const FALSE_WORDS = new Set(["false", "no", "fail"]);

function scoresPath(runId) {
  return `/api/v1/runs/${encodeURIComponent(runId)}/scores`;
}

function row(score) {
  return el(
    "tr",
    { "data-score": score.id },
    el("td", { class: "score-name" }, score.name),
    el("td", { class: "num score-value" }, String(score.value)),
    el("td", { class: "score-comment" }, score.comment || ""),
    el("td", { class: "score-by" }, score.by, el("span", { class: "muted" }, ` · ${score.source}`)),
    el("td", {}, ageElement(score.at, " ago")),
  );
}

/** Read the run's scores and show them (the newest last, as given). */
export async function showScores(runId) {
  const scores = await reported(() => getJson(scoresPath(runId)));
  if (!scores) return;
  const rows = document.getElementById("scores");
  rows.replaceChildren(...scores.map(row));
  if (!scores.length) rows.append(el("tr", {}, el("td", { colspan: 5, class: "muted" }, "no scores yet")));
  document.getElementById("scores-count").textContent = scores.length ? `(${scores.length})` : "";
  document.body.dataset.scoresShown = String(scores.length);
}

/** A value from the form: a number, or a word for true or false; null if neither. */
function valueOf(text) {
  const word = text.trim().toLowerCase();
  if (TRUE_WORDS.has(word)) return true;
  if (FALSE_WORDS.has(word)) return false;
  const number = Number(word);
  return word !== "" && Number.isFinite(number) ? number : null;
}

async function addScore(runId, form) {
  const value = valueOf(form.elements.value.value);
  if (value === null) {
    flash("a score is a number or true/false");
    return;
  }
  const comment = form.elements.comment.value.trim();
  const body = { name: form.elements.name.value.trim(), value, comment: comment || null };
  await reported(async () => {
    await postJson(scoresPath(runId), body);
    form.elements.comment.value = "";
    flash(`scored ${body.name}`, "ok");
    await showScores(runId);
  });
}

/** Show the scores, keep them fresh while the page is shown, and wire the form. */
export function followScores(runId) {
  const form = document.getElementById("score-form");
  if (!mayOperate()) {
    for (const field of form.elements) field.disabled = true;
    form.title = "needs the operate scope";
  }
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    addScore(runId, form);
  });
  setInterval(() => { if (!document.hidden) showScores(runId); }, POLL_MS);
  return showScores(runId);
}
