// A live feed (section 5 frames) over the `eventsource` package: its `fetch` hook sends the
// bearer token on every (re)connect and it resends Last-Event-ID by itself. This wrapper turns
// frames into calls: changes, `resync` (refetch), `reauth` (close, ask for a token, resume).
import { EventSource } from 'eventsource';
import type { Row } from './types';

export type ChangeEvent =
  | { op: 'insert' | 'update'; table: string; row: Row }
  | { op: 'delete'; table: string; rowUid: string };

export interface Frame {
  type: string;
  id: string;
  data: string;
}

export type FeedState = 'connecting' | 'live' | 'closed' | 'failed';

export interface FeedHandlers {
  onChange?(event: ChangeEvent, id: string): void;
  onResync?(reason: string): void;
  /** The token expired: return a fresh one to resume from the last id, or null to stop. */
  onReauth?(reason: string): Promise<string | null> | string | null;
  onFrame?(frame: Frame): void;
  onState?(state: FeedState, detail?: string): void;
}

/** What the wrapper needs of an EventSource (the package's class, or a stand-in in unit tests). */
export interface EventSourceLike {
  addEventListener(type: string, listener: (event: MessageEvent) => void): void;
  close(): void;
  onerror: ((event: Event & { code?: number; message?: string }) => void) | null;
  onopen: ((event: Event) => void) | null;
  readonly readyState: number;
}

export type EventSourceFactory = (url: string, authorization: () => string) => EventSourceLike;

export const packageEventSource: EventSourceFactory = (url, authorization) =>
  new EventSource(url, {
    fetch: (input, init) =>
      fetch(input, { ...init, headers: { ...init.headers, Authorization: authorization() } }),
  }) as unknown as EventSourceLike;

const CLOSED = 2;

export class LiveFeed {
  private source: EventSourceLike | null = null;
  private lastId = '';
  private stopped = false;

  constructor(
    private readonly url: string,
    private token: string,
    private readonly handlers: FeedHandlers,
    private readonly factory: EventSourceFactory = packageEventSource,
  ) {}

  get lastEventId(): string {
    return this.lastId;
  }

  start(): void {
    this.stopped = false;
    this.open();
  }

  close(): void {
    this.stopped = true;
    this.source?.close();
    this.source = null;
    this.handlers.onState?.('closed');
  }

  private open(): void {
    const url = this.lastId ? `${this.url}${this.url.includes('?') ? '&' : '?'}lastEventId=${
      encodeURIComponent(this.lastId)}` : this.url;
    this.handlers.onState?.('connecting');
    const source = this.factory(url, () => `Bearer ${this.token}`);
    this.source = source;
    source.addEventListener('connected', (e) => {
      this.frame('connected', e);
      this.handlers.onState?.('live');
    });
    source.addEventListener('message', (e) => {
      this.frame('message', e);
      const event = JSON.parse(e.data) as ChangeEvent;
      this.handlers.onChange?.(event, e.lastEventId);
    });
    source.addEventListener('resync', (e) => {
      this.frame('resync', e);
      const reason = (JSON.parse(e.data) as { reason?: string }).reason ?? 'unknown';
      this.handlers.onResync?.(reason);
    });
    source.addEventListener('reauth', (e) => {
      this.frame('reauth', e);
      const reason = (JSON.parse(e.data) as { reason?: string }).reason ?? 'token_expired';
      void this.reauth(reason);
    });
    source.onerror = (e) => {
      if (this.stopped || this.source !== source) return;
      if (source.readyState === CLOSED) {
        this.handlers.onState?.('failed', e.message ?? `HTTP ${e.code ?? ''}`.trim());
      } else {
        this.handlers.onState?.('connecting');
      }
    };
  }

  private frame(type: string, event: MessageEvent): void {
    if (event.lastEventId) this.lastId = event.lastEventId;
    this.handlers.onFrame?.({ type, id: event.lastEventId ?? '', data: String(event.data) });
  }

  private async reauth(reason: string): Promise<void> {
    this.source?.close();
    this.source = null;
    this.handlers.onState?.('closed', reason);
    const token = this.handlers.onReauth ? await this.handlers.onReauth(reason) : null;
    if (token && !this.stopped) {
      this.token = token;
      this.open();
    }
  }
}
