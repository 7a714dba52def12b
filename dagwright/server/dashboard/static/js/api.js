// The dashboard's one door to /api/v1: same-origin fetches with the session cookie, the
// CSRF token on every state change, problem+json turned into an Error with its one line.

let csrfToken = null;

/** An API answer that was not 2xx: `message` is the problem's one-line detail. */
export class ApiError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

async function problemOf(response) {
  try {
    return await response.json();
  } catch {
    return null;
  }
}

async function checked(response) {
  if (response.status === 401) {
    // The session ended (expired, logged out, token revoked): back to the login page.
    const next = encodeURIComponent(location.pathname + location.search);
    location.assign(`/login?next=${next}`);
  }
  if (!response.ok) throw new ApiError(response.status, await problemOf(response));
  return response.status === 204 ? null : response.json();
}

/** GET a JSON document of the API. */
export async function getJson(path) {
  return (await getJsonDated(path)).body;
}

/** GET a JSON document and the server's clock when it answered (its Date header, ms). */
export async function getJsonDated(path) {
  const response = await fetch(path, {
    credentials: "same-origin",
    headers: { Accept: "application/json" },
  });
  const body = await checked(response);
  return { body, serverMs: Date.parse(response.headers.get("Date") || "") || 0 };
}

/** The session's CSRF token: rendered into the page, else asked of /api/v1/whoami once. */
async function csrf() {
  if (csrfToken === null) {
    const meta = document.querySelector('meta[name="csrf-token"]');
    csrfToken = meta && meta.content ? meta.content : null;
  }
  if (csrfToken === null) {
    const me = await getJson("/api/v1/whoami");
    csrfToken = me.csrf_token || "";
  }
  return csrfToken;
}

/** A state-changing call (POST/DELETE) with a JSON body and the CSRF header. */
export async function send(method, path, body) {
  const headers = { Accept: "application/json", "X-CSRF-Token": await csrf() };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    credentials: "same-origin",
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return checked(response);
}

export const postJson = (path, body) => send("POST", path, body ?? {});
