/** Errors: every failed call throws an `AuthoricError` carrying the contract's error object
 * (section 1). Requests that never reached the server, and answers cut off or unreadable, get
 * status 0 and code `NETWORK_ERROR`. */

export class AuthoricError extends Error {
  readonly status: number;
  readonly code: string;
  readonly details: Record<string, unknown>;
  /** Seconds to wait before trying again (`Retry-After`, on 429). */
  retryAfter?: number;

  constructor(status: number, code: string, message: string, details: Record<string, unknown> = {}) {
    super(message);
    this.name = "AuthoricError";
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

/** The `AuthoricError` a non-2xx response carries (its body is read). */
export async function errorOf(res: Response): Promise<AuthoricError> {
  let body: unknown = null;
  try {
    body = await res.json();
  } catch {
    // not JSON: a proxy's page, an empty body
  }
  const err = (body as { error?: { code?: unknown; message?: unknown; details?: unknown } } | null)?.error;
  const error = err && typeof err.code === "string"
    ? new AuthoricError(res.status, err.code, String(err.message ?? err.code), (err.details as Record<string, unknown>) ?? {})
    : new AuthoricError(res.status, `HTTP_${res.status}`, res.statusText || `HTTP ${res.status}`);
  const retry = Number(res.headers.get("Retry-After"));
  if (res.headers.has("Retry-After") && Number.isFinite(retry)) error.retryAfter = retry;
  return error;
}

export function networkError(cause: unknown): AuthoricError {
  const err = new AuthoricError(0, "NETWORK_ERROR", cause instanceof Error ? cause.message : String(cause));
  (err as { cause?: unknown }).cause = cause;
  return err;
}
