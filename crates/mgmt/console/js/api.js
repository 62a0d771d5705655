// The management API, as the console calls it: paths relative to the page (so a proxy may
// serve the console under a prefix), HTTP Basic credentials from sessionStorage on every
// request (as RabbitMQ's own UI does; nothing persists past the tab), and RabbitMQ's
// {error, reason} bodies turned into ApiError.

const KEY = 'ferry.auth';
const USER = 'ferry.user';

/** The one virtual host, as paths name it. */
export const VHOST = '%2F';

/** A path segment: every name is user data and may hold '/', '#', '?', spaces... */
export const seg = encodeURIComponent;

export class ApiError extends Error {
  constructor(status, reason) {
    super(reason);
    this.name = 'ApiError';
    this.status = status;
  }
}

let onUnauthorized = () => {};

/** Called when the API refuses the stored credentials (the app shows the login form). */
export function whenUnauthorized(f) {
  onUnauthorized = f;
}

function basic(user, password) {
  // btoa takes Latin-1 only; credentials may be any UTF-8.
  const utf8 = new TextEncoder().encode(`${user}:${password}`);
  let binary = '';
  for (const b of utf8) binary += String.fromCharCode(b);
  return `Basic ${btoa(binary)}`;
}

export function storeCredentials(user, password) {
  sessionStorage.setItem(KEY, basic(user, password));
  sessionStorage.setItem(USER, user);
}

export function forgetCredentials() {
  sessionStorage.removeItem(KEY);
  sessionStorage.removeItem(USER);
}

export function hasCredentials() {
  return sessionStorage.getItem(KEY) !== null;
}

/** A query string from an object, skipping empty values. */
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const text = q.toString();
  return text ? `?${text}` : '';
}

/**
 * Calls `api/<path>`. Options: method, body (sent as JSON), signal, headers,
 * credentials ({user, password}: tried instead of the stored ones, for the login form).
 * Resolves to the parsed JSON body, or null for an empty one.
 */
export async function api(path, options = {}) {
  const { method = 'GET', body, signal, headers = {}, credentials } = options;
  // X-Requested-With: ferryd leaves out WWW-Authenticate on our 401s, so the browser does
  // not put its own password prompt over the login form.
  const h = { 'X-Requested-With': 'XMLHttpRequest', Accept: 'application/json', ...headers };
  const auth = credentials ? basic(credentials.user, credentials.password) : sessionStorage.getItem(KEY);
  if (auth) h.Authorization = auth;
  if (body !== undefined) h['Content-Type'] = 'application/json';
  const response = await fetch(`api/${path}`, {
    method,
    headers: h,
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
    cache: 'no-store',
    // Only the Authorization header above: never credentials the browser cached itself.
    credentials: 'omit',
  });
  const text = await response.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (!response.ok) {
    const reason = (data && (data.reason || data.error)) || `${response.status} ${response.statusText}`;
    if (response.status === 401 && !credentials) onUnauthorized(reason);
    throw new ApiError(response.status, reason);
  }
  return data;
}

/** Whether an error is an aborted request (a newer refresh or a page change). */
export function aborted(e) {
  return e && e.name === 'AbortError';
}
