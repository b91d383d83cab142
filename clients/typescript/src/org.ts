/** The signed-in member's org, run by its members (contract sections 3a, 3b): members,
 * invitations and API keys, each within the member's permissions and roles' `grants`. */

import type { Http } from "./http.js";

export interface OrgMember { user: string; email: string; roles: string[]; joinedAt: string }
export interface Invitation { uid: string; email: string; roles: string[]; invitedBy: string | null; expiresAt: string }
export interface ApiKey {
  uid: string; name: string; org: string; roles: string[];
  createdAt: string; expiresAt: string | null; lastUsedAt: string | null;
}
/** A key as created: `key` is shown this once. */
export interface NewApiKey extends ApiKey { key: string }

export class Org {
  constructor(private readonly http: Http, private readonly app: string) {}

  private path(rest: string): string {
    return `/${encodeURIComponent(this.app)}/org/${rest}`;
  }

  readonly members = {
    list: (page: { limit?: number; after?: string | null } = {}) =>
      this.http.json<{ items: OrgMember[]; next: string | null }>("GET", this.path("members"), { query: page }),
    update: (user: string, roles: string[]) =>
      this.http.json<{ org: string; user: string; roles: string[] }>("PUT", this.path(`members/${encodeURIComponent(user)}`), { json: { roles } }),
    remove: async (user: string): Promise<void> => {
      await this.http.send("DELETE", this.path(`members/${encodeURIComponent(user)}`));
    },
  };

  readonly invitations = {
    /** Invites `email` with `roles` (a mail with the link goes out); the same email again resends. */
    create: (invitation: { email: string; roles: string[] }) =>
      this.http.json<Invitation>("POST", this.path("invitations"), { json: invitation }),
    list: () => this.http.json<{ items: Invitation[] }>("GET", this.path("invitations")),
    revoke: async (uid: string): Promise<void> => {
      await this.http.send("DELETE", this.path(`invitations/${encodeURIComponent(uid)}`));
    },
  };

  readonly keys = {
    create: (key: { name: string; roles: string[]; expiresAt?: string }) =>
      this.http.json<NewApiKey>("POST", this.path("keys"), { json: key }),
    list: () => this.http.json<{ items: ApiKey[] }>("GET", this.path("keys")),
    revoke: async (uid: string): Promise<void> => {
      await this.http.send("DELETE", this.path(`keys/${encodeURIComponent(uid)}`));
    },
  };
}
