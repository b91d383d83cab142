import { describe, expect, it } from 'vitest';
import { type EventSourceLike, LiveFeed } from './feed';

/** A stand-in for the eventsource package: the test plays the server's frames into it. */
class ScriptedSource implements EventSourceLike {
  listeners = new Map<string, ((e: MessageEvent) => void)[]>();
  onerror: EventSourceLike['onerror'] = null;
  onopen: EventSourceLike['onopen'] = null;
  readyState = 1;
  closed = false;
  constructor(readonly url: string, readonly authorization: () => string) {}
  addEventListener(type: string, listener: (e: MessageEvent) => void): void {
    this.listeners.set(type, [...(this.listeners.get(type) ?? []), listener]);
  }
  close(): void {
    this.closed = true;
    this.readyState = 2;
  }
  emit(type: string, data: unknown, id = ''): void {
    const event = { data: JSON.stringify(data), lastEventId: id } as MessageEvent;
    for (const listener of this.listeners.get(type) ?? []) listener(event);
  }
}

function harness() {
  const sources: ScriptedSource[] = [];
  const factory = (url: string, auth: () => string) => {
    const source = new ScriptedSource(url, auth);
    sources.push(source);
    return source;
  };
  return { sources, factory };
}

describe('the live feed wrapper', () => {
  it('sends the bearer token and hands data frames over as changes', () => {
    const { sources, factory } = harness();
    const changes: unknown[] = [];
    new LiveFeed('/x/subscribe', 'tok-1', { onChange: (e, id) => changes.push([e.op, id]) }, factory).start();
    expect(sources[0].authorization()).toBe('Bearer tok-1');
    sources[0].emit('message', { op: 'insert', table: 't', row: { uid: 'r1' } }, '7');
    expect(changes).toEqual([['insert', '7']]);
  });

  it('on resync asks for a refetch and keeps the stream open', () => {
    const { sources, factory } = harness();
    const reasons: string[] = [];
    new LiveFeed('/x/subscribe', 't', { onResync: (r) => reasons.push(r) }, factory).start();
    sources[0].emit('resync', { reason: 'bulk_change' }, '40');
    expect(reasons).toEqual(['bulk_change']);
    expect(sources[0].closed).toBe(false);
  });

  it('on reauth closes, calls the refresh hook and resumes from the last id with the new token', async () => {
    const { sources, factory } = harness();
    const asked: string[] = [];
    const feed = new LiveFeed('/x/subscribe', 'old', {
      onReauth: (reason) => { asked.push(reason); return 'new'; },
    }, factory);
    feed.start();
    sources[0].emit('message', { op: 'delete', table: 't', rowUid: 'r' }, '12');
    sources[0].emit('reauth', { reason: 'token_expired' });
    await Promise.resolve();
    await Promise.resolve();
    expect(sources[0].closed).toBe(true);
    expect(asked).toEqual(['token_expired']);
    expect(sources).toHaveLength(2);
    expect(sources[1].url).toBe('/x/subscribe?lastEventId=12');
    expect(sources[1].authorization()).toBe('Bearer new');
  });

  it('on reauth stays closed when the refresh hook has no token', async () => {
    const { sources, factory } = harness();
    const states: string[] = [];
    new LiveFeed('/x/subscribe', 'old', { onReauth: () => null, onState: (s) => states.push(s) },
      factory).start();
    sources[0].emit('reauth', { reason: 'token_expired' });
    await Promise.resolve();
    expect(sources).toHaveLength(1);
    expect(states.at(-1)).toBe('closed');
  });

  it('shows every frame to the inspector', () => {
    const { sources, factory } = harness();
    const frames: string[] = [];
    new LiveFeed('/x', 't', { onFrame: (f) => frames.push(`${f.type}:${f.id}`) }, factory).start();
    sources[0].emit('connected', { table: 't', live: true });
    sources[0].emit('message', { op: 'insert', table: 't', row: { uid: 'a' } }, '3');
    expect(frames).toEqual(['connected:', 'message:3']);
  });
});
