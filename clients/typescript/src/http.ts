/** The HTTP seam: builds URLs, sends the bearer token, turns error bodies and failed transfers
 * into `AuthoricError`, and retries once after `401 TOKEN_EXPIRED` with a refreshed token. */

import { AuthoricError, errorOf, networkError } from "./errors.js";

/** Where tokens come from: a signed-in session (refreshing) or a fixed token (admin). */
export interface Tokens {
  /** The token to send now (refreshed first when it is in the last tenth of its life). */
  token(): Promise<string | null>;
  /** `used` was answered `TOKEN_EXPIRED`: a fresh token, or null when there is none. */
  expired(used: string): Promise<string | null>;
}

export type Query = Record<string, string | number | undefined | null>;

export interface SendOptions {
  query?: Query;
  json?: unknown;
  body?: BodyInit;
  contentType?: string;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /** false: send no token (sign-in, refresh). */
  auth?: boolean;
}

export type FetchLike = (input: string, init?: RequestInit) => Promise<Response>;

export class Http {
  readonly base: string;
  readonly fetch: FetchLike;
  tokens: Tokens | null = null;

  constructor(url: string, fetchFn?: FetchLike) {
    this.base = url.replace(/\/+$/, "");
    // Called through a closure: browsers refuse `fetch` called with another `this`.
    this.fetch = (input, init) => (fetchFn ?? globalThis.fetch)(input, init);
  }

  url(path: string, query?: Query): string {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(query ?? {})) {
      if (value !== undefined && value !== null) params.set(key, String(value));
    }
    const qs = params.toString();
    return this.base + path + (qs ? `?${qs}` : "");
  }

  /** A 2xx response, or throws `AuthoricError`. */
  async send(method: string, path: string, opts: SendOptions = {}): Promise<Response> {
    const url = this.url(path, opts.query);
    const useTokens = opts.auth !== false ? this.tokens : null;
    let token = useTokens ? await useTokens.token() : null;
    const headers: Record<string, string> = { Accept: "application/json", ...opts.headers };
    let body = opts.body;
    if (opts.json !== undefined) {
      body = JSON.stringify(opts.json);
      headers["Content-Type"] = "application/json";
    } else if (opts.contentType) {
      headers["Content-Type"] = opts.contentType;
    }
    for (let attempt = 0; ; attempt++) {
      if (token) headers.Authorization = `Bearer ${token}`;
      let res: Response;
      try {
        res = await this.fetch(url, { method, headers, body, signal: opts.signal });
      } catch (err) {
        if (opts.signal?.aborted) throw err;
        throw networkError(err);
      }
      if (res.ok) return res;
      const err = await errorOf(res);
      if (attempt === 0 && useTokens && token && err.status === 401 && err.code === "TOKEN_EXPIRED") {
        token = await useTokens.expired(token);
        if (token) continue;
      }
      throw err;
    }
  }

  async json<T>(method: string, path: string, opts: SendOptions = {}): Promise<T> {
    const res = await this.send(method, path, opts);
    if (res.status === 204) return undefined as T;
    try {
      return (await res.json()) as T;
    } catch (err) {
      // The answer was cut off (the server died mid-body: undici's "terminated") or is not
      // JSON: the caller cannot know what happened, as when the request never arrived.
      if (opts.signal?.aborted) throw err;
      throw networkError(err);
    }
  }
}

export { AuthoricError };
