/** One change stream (contract sections 5 and 5b) with every rule of section 7 built in:
 * `Last-Event-ID` on every reconnect, `reauth` -> refresh -> reconnect, exponential backoff
 * with jitter on drops and restarts, `429` waits `Retry-After`, `resync` goes to `onResync`,
 * and an id never delivered twice. The app sees every change exactly as if the connection had
 * never dropped; where the server answers `resync` instead, the app is told. */

import { AuthoricError, errorOf, networkError } from "./errors.js";
import type { Http, Query } from "./http.js";
import { readSse, type SseFrame } from "./sse.js";
import type { ChangeEvent, ResyncInfo, Status } from "./types.js";

export interface StreamOptions<E = ChangeEvent> {
  onEvent?: (event: E) => void;
  onResync?: (reason: string, info: ResyncInfo) => void;
  onStatus?: (status: Status) => void;
  /** A failure that ends the stream (403, 404, a revoked session): the stream is closed. */
  onError?: (error: AuthoricError) => void;
  /** Resume after this position (an event's `id`) instead of from now. */
  lastEventId?: string;
  expand?: string[];
  /** Reconnect delays in ms: the first, doubling up to `max` (each with jitter). */
  backoff?: { initial?: number; max?: number };
  /** A stream silent for this long (ms; the server pings every 25 s) is taken as dropped. */
  heartbeatTimeout?: number;
}

export interface Subscription {
  /** The position of the last event delivered (resume a later stream from it). */
  readonly lastEventId: string | undefined;
  readonly status: Status;
  close(): void;
}

// Asking to resume from a position that does not parse makes the server answer with
// `resync invalid_position` and the head's id (section 5): the stream learns its position at
// once, so even a drop before its first event resumes without a gap. That resync is ours, not
// news for the app, and is not passed on.
const PROBE = "head";

/** true when position a comes after b (ids are decimal integers of any length). */
export function after(a: string, b: string | undefined): boolean {
  if (b === undefined) return true;
  return a.length !== b.length ? a.length > b.length : a > b;
}

export class Stream<E = ChangeEvent> implements Subscription {
  lastEventId: string | undefined;
  status: Status = "connecting";
  private closed = false;
  private abort: AbortController | null = null;
  private attempt = 0;
  private wake: (() => void) | null = null;

  constructor(private readonly http: Http, private readonly path: string, private readonly query: Query,
              private readonly opts: StreamOptions<E>) {
    this.lastEventId = opts.lastEventId;
    void this.run();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.abort?.abort();
    this.wake?.();
    this.setStatus("closed");
  }

  private setStatus(status: Status): void {
    if (this.status === status || (this.status === "closed" && status !== "closed")) return;
    this.status = status;
    this.opts.onStatus?.(status);
  }

  private async run(): Promise<void> {
    this.opts.onStatus?.("connecting");
    while (!this.closed) {
      let wait: number;
      try {
        const outcome = await this.connect();
        if (this.closed) return;
        wait = outcome === "reauth" ? await this.refreshed() : this.backoff();
      } catch (err) {
        if (this.closed) return;
        const error = err instanceof AuthoricError ? err : networkError(err);
        if (error.status === 429) wait = (error.retryAfter ?? 30) * 1000;
        else if (error.status === 401 && error.code === "TOKEN_EXPIRED") {
          try {
            wait = await this.refreshed();
          } catch (refreshErr) {
            if (this.fatal(refreshErr)) return;
            wait = this.backoff();
          }
        } else if (error.status === 0 || error.status >= 500) wait = this.backoff();
        else {
          this.fatal(error);
          return;
        }
      }
      this.setStatus("reconnecting");
      if (wait > 0) await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, wait);
        this.wake = () => { clearTimeout(timer); resolve(); };
      });
      this.wake = null;
    }
  }

  private usedToken: string | null = null;

  /** After `reauth` or `TOKEN_EXPIRED`: a fresh token (reconnect at once), or throws. */
  private async refreshed(): Promise<number> {
    const fresh = this.usedToken && this.http.tokens ? await this.http.tokens.expired(this.usedToken) : null;
    if (!fresh) throw new AuthoricError(401, "TOKEN_EXPIRED", "the access token expired and cannot be refreshed");
    return 0;
  }

  /** true when the error ends the stream (not a passing network failure). */
  private fatal(err: unknown): boolean {
    if (err instanceof AuthoricError && err.status === 0) return false;
    this.opts.onError?.(err instanceof AuthoricError ? err : networkError(err));
    this.close();
    return true;
  }

  private backoff(): number {
    const initial = this.opts.backoff?.initial ?? 500;
    const max = this.opts.backoff?.max ?? 30_000;
    const ceiling = Math.min(max, initial * 2 ** this.attempt++);
    return ceiling / 2 + Math.random() * (ceiling / 2);
  }

  /** One connection: resolves when it ends ("reauth" or "ended"); rejects on a failure. */
  private async connect(): Promise<"reauth" | "ended"> {
    const abort = (this.abort = new AbortController());
    const tokens = this.http.tokens;
    const token = (this.usedToken = tokens ? await tokens.token() : null);
    if (this.closed) return "ended";
    // Only headers the contract's CORS allows (a browser on another origin preflights them).
    const headers: Record<string, string> = { Accept: "text/event-stream" };
    if (token) headers.Authorization = `Bearer ${token}`;
    const probing = this.lastEventId === undefined;
    headers["Last-Event-ID"] = this.lastEventId ?? PROBE;
    const query = { ...this.query, expand: this.opts.expand?.length ? this.opts.expand.join(",") : undefined };
    let res: Response;
    try {
      res = await this.http.fetch(this.http.url(this.path, query), { headers, signal: abort.signal });
    } catch (err) {
      throw networkError(err);
    }
    if (!res.ok || !res.body) throw await errorOf(res);
    let outcome: "reauth" | "ended" = "ended";
    const limit = this.opts.heartbeatTimeout ?? 75_000;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const alive = () => {
      clearTimeout(timer);
      timer = setTimeout(() => abort.abort(), limit);
    };
    alive();
    try {
      await readSse(res.body, (frame) => {
        if (this.closed) return false;
        if (frame.event === "reauth") {
          outcome = "reauth";
          return false;
        }
        this.frame(frame, probing);
        return !this.closed;
      }, alive);
    } catch (err) {
      if (this.closed) return "ended";
      throw networkError(err);
    } finally {
      clearTimeout(timer);
      abort.abort();
    }
    return outcome;
  }

  private frame(frame: SseFrame, probing: boolean): void {
    let data: Record<string, unknown>;
    try {
      data = JSON.parse(frame.data) as Record<string, unknown>;
    } catch {
      return;
    }
    if (frame.event === "connected") {
      this.attempt = 0;
      this.setStatus("live");
      return;
    }
    if (frame.event === "resync") {
      const reason = String(data.reason);
      if (frame.id !== undefined) this.lastEventId = frame.id;
      if (probing && reason === "invalid_position") return; // the answer to our probe
      const info: ResyncInfo = {};
      if (typeof data.table === "string") info.table = data.table;
      if (typeof data.lastId === "number") info.lastId = data.lastId;
      this.opts.onResync?.(reason, info);
      return;
    }
    if (frame.event !== "message" || frame.id === undefined) return;
    if (!after(frame.id, this.lastEventId)) return; // delivered already
    this.lastEventId = frame.id;
    const event = data.op === "delete"
      ? { id: frame.id, op: "delete", table: data.table, rowUid: data.rowUid }
      : { id: frame.id, op: data.op, table: data.table, row: data.row };
    this.opts.onEvent?.(event as E);
  }
}
