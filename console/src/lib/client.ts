// The console's calls and streams go through `@authoric/client`: `@authoric/client/admin` with
// the session's admin token for the operator's routes (contract sections 2 and 2a), and the app
// client with a "view as" token for a member's own routes (sections 4 and 5).
import { createClient, type Client } from '@authoric/client';
import { createAdminClient, type AdminClient, type AppAdmin } from '@authoric/client/admin';

export { AuthoricError } from '@authoric/client/admin';

const origin = () => globalThis.location?.origin ?? 'http://127.0.0.1:8000';

let cached: { token: string; client: AdminClient } | null = null;

/** The admin client for `token`. */
export function adminClient(token: string): AdminClient {
  if (cached?.token !== token) cached = { token, client: createAdminClient({ url: origin(), token }) };
  return cached.client;
}

/** One app's administration with `token`. */
export function appAdmin(token: string, app: string): AppAdmin {
  return adminClient(token).app(app);
}

/** A client of `app` that acts with a fixed access token (an impersonation token cannot be
 *  refreshed): `renew` is asked for a new one when the server says it expired (a stream's
 *  `reauth`, a `401 TOKEN_EXPIRED`). */
export function tokenClient(app: string, token: () => string, renew: () => Promise<string | null>): Client {
  const client = createClient({ url: origin(), app });
  client.http.tokens = { token: async () => token(), expired: async () => renew() };
  return client;
}
