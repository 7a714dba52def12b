// How the evals pages write figures: pass rates, grades, dollars, seconds; a dash for none.

const NONE = "–";

/** `75%` of a rate in [0, 1]. */
export function percent(rate) {
  return rate === null || rate === undefined ? NONE : `${Math.round(rate * 100)}%`;
}

/** A grade in [0, 1] with two decimals. */
export function grade(value) {
  return value === null || value === undefined ? NONE : Number(value).toFixed(2);
}

/** A signed difference (`+0.25`, `-0.50`), for deltas. */
export function delta(value) {
  if (value === null || value === undefined) return NONE;
  return `${value > 0 ? "+" : ""}${Number(value).toFixed(2)}`;
}

/** `$0.0123`; `unknown` where some model was unpriced (null). */
export function usd(value) {
  return value === null || value === undefined ? "unknown" : `$${Number(value).toFixed(4)}`;
}

/** `1.5s`. */
export function seconds(value) {
  return value === null || value === undefined ? NONE : `${Number(value).toFixed(1)}s`;
}

/** Seconds from the eval's start to its end (null while it runs). */
export function durationOf(record) {
  if (!record.finished_at) return null;
  return (Date.parse(record.finished_at) - Date.parse(record.started_at)) / 1000;
}

/** The share of grades that passed, over every case run (null with none). */
export function gradesPassed(results) {
  const grades = results.flatMap((result) => result.scores.map((score) => score.passed));
  return grades.length ? grades.filter(Boolean).length / grades.length : null;
}

/** Every scorer of the eval, in first-seen order (as the API's `stats`). */
export function scorerNames(record) {
  const names = [];
  for (const name of record.cases) {
    for (const scorer of record.scorers[name] || []) if (!names.includes(scorer)) names.push(scorer);
  }
  return names;
}
