// Times as a person reads them: in the browser's time zone (or a schedule's own), to the
// second, with the zone's name; the same instant in UTC in the tooltip, for comparing with
// logs and the CLI. The API's times are ISO 8601 with an offset (UTC): only display changes.

import { age, el } from "./dom.js";

const FIELDS = {
  year: "numeric", month: "2-digit", day: "2-digit",
  hour: "2-digit", minute: "2-digit", second: "2-digit",
  hourCycle: "h23", timeZoneName: "short",
};
const formats = new Map(); // one Intl formatter per zone: building one costs far more than using it

function formatOf(timeZone) {
  const key = timeZone || "";
  if (!formats.has(key)) formats.set(key, new Intl.DateTimeFormat("en-US", { ...FIELDS, timeZone }));
  return formats.get(key);
}

/** `2026-11-29 09:37:41 GMT+1`: an ISO time in `timeZone` (default: the browser's). */
export function clockTime(iso, timeZone = undefined) {
  const parts = Object.fromEntries(
    formatOf(timeZone).formatToParts(new Date(iso)).map((part) => [part.type, part.value]),
  );
  const { year, month, day, hour, minute, second, timeZoneName } = parts;
  return `${year}-${month}-${day} ${hour}:${minute}:${second} ${timeZoneName}`;
}

/** A <time> showing `iso` in `timeZone` (default: the browser's), UTC in its tooltip. */
export function timeElement(iso, timeZone = undefined) {
  if (!iso) return "-";
  return el("time", { datetime: iso, title: clockTime(iso, "UTC") }, clockTime(iso, timeZone));
}

/** A <time> showing how long ago `iso` was (`42s`), the local and UTC times in its tooltip. */
export function ageElement(iso, suffix = "") {
  if (!iso) return "";
  const title = `${clockTime(iso)} (${clockTime(iso, "UTC")})`;
  return el("time", { datetime: iso, title }, `${age(iso)}${suffix}`);
}
