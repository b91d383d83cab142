// The console's one HTTP client: JSON in and out, the contract's error envelope as ApiError.
// It speaks only the public contract (sections 2, 2a and, for "view as", 4 and 5).

export interface ErrorBody {
  code: string;
  message: string;
  details: Record<string, unknown>;
}

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly details: Record<string, unknown>;

  constructor(status: number, body: ErrorBody) {
    super(body.message);
    this.status = status;
    this.code = body.code;
    this.details = body.details ?? {};
  }
}

export type Query = Record<string, string | number | null | undefined>;

export function withQuery(path: string, query: Query = {}): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value !== null && value !== undefined && value !== '') params.set(key, String(value));
  }
  const text = params.toString();
  return text ? `${path}?${text}` : path;
}

export async function errorFrom(response: Response): Promise<ApiError> {
  let body: ErrorBody = { code: `HTTP_${response.status}`, message: response.statusText, details: {} };
  try {
    const parsed = (await response.json()) as { error?: ErrorBody };
    if (parsed.error) body = parsed.error;
  } catch {
    // A body that is not the contract's envelope keeps the status text.
  }
  return new ApiError(response.status, body);
}

/** Calls `path` with `token` as bearer; resolves to the parsed JSON body (undefined for 204). */
export async function call<T>(
  token: string,
  method: string,
  path: string,
  body?: unknown,
  query?: Query,
): Promise<T> {
  const headers: Record<string, string> = { Authorization: `Bearer ${token}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const response = await fetch(withQuery(path, query), {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) throw await errorFrom(response);
  if (response.status === 204) return undefined as T;
  return (await response.json()) as T;
}

export const enc = encodeURIComponent;
