/** Reading `text/event-stream` from a fetch body (WHATWG SSE parsing rules). fetch rather than
 * `EventSource`, because `EventSource` cannot send an `Authorization` header. */

export interface SseFrame {
  event: string;
  data: string;
  /** The frame's own `id:` field, if it had one. */
  id?: string;
}

/** Calls `onFrame` for each frame and `onActivity` for every chunk (pings included), until the
 * body ends (resolves) or fails (rejects), or `onFrame` returns false (stops reading). */
export async function readSse(
  body: ReadableStream<Uint8Array>,
  onFrame: (frame: SseFrame) => boolean | void,
  onActivity: () => void,
): Promise<void> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let event = "";
  let data: string[] = [];
  let id: string | undefined;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      onActivity();
      buffer += decoder.decode(value, { stream: true });
      let start = 0;
      for (;;) {
        const match = /\r\n|\r|\n/g;
        match.lastIndex = start;
        const found = match.exec(buffer);
        // A lone `\r` at the end may be the first half of `\r\n`: wait for more.
        if (!found || (found[0] === "\r" && found.index === buffer.length - 1)) break;
        const line = buffer.slice(start, found.index);
        start = found.index + found[0].length;
        if (line === "") {
          if (data.length) {
            const frame: SseFrame = { event: event || "message", data: data.join("\n"), id };
            if (onFrame(frame) === false) return;
          }
          event = "";
          data = [];
          id = undefined;
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "event") event = value;
        else if (field === "data") data.push(value);
        else if (field === "id" && !value.includes("\0")) id = value;
      }
      buffer = buffer.slice(start);
    }
  } finally {
    reader.cancel().catch(() => undefined);
  }
}
