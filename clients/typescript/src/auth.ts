/** Sessions (contract section 3): sign-in, sign-out, and the refresh rule. Refresh tokens
 * rotate, and reusing a spent one revokes the whole family, so one refresh runs at a time for
 * every caller of this client: and, when a `storage` is shared by several tabs, for every tab
 * (under a Web Lock where the browser has them, adopting a pair another tab already rotated). */

import { AuthoricError } from "./errors.js";
import type { Http, Tokens } from "./http.js";

export interface TokenPair {
  access_token: string;
  refresh_token?: string | null;
  token_type?: string;
  expires_in: number;
}

export interface Session {
  accessToken: string;
  refreshToken: string | null;
  /** When the access token expires, in ms since the epoch by this machine's clock. */
  expiresAt: number;
  /** Its lifetime in ms, as the server gave it. */
  lifetime: number;
}

/** `localStorage`, `sessionStorage`, or anything shaped like them. */
export interface SessionStorage {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

/** `signUp`'s answer: a verify mail is on its way (the app requires verification), or the
 * new account is signed in (an account token: no org yet). */
export type SignUpResult = { status: "verification_sent" } | { status: "signed_in"; session: Session };

export interface Me {
  user: { uid: string; email: string; emailVerified: boolean; createdAt: string };
  /** The org of this session's token; null for an account token. */
  org: string | null;
  roles: string[];
  memberships: { org: string; orgName: string; roles: string[] }[];
  invitations: { uid: string; org: string; orgName: string; roles: string[]; expiresAt: string }[];
}

export interface SessionInfo {
  id: string;
  createdAt: string;
  lastUsedAt: string;
  userAgent: string | null;
  /** The session this client is signed in with. */
  current: boolean;
}

export interface AuthOptions {
  storage?: SessionStorage;
  storageKey?: string;
  /** This machine's clock in ms (tests move it). */
  now?: () => number;
}

interface Locks {
  request<T>(name: string, cb: () => Promise<T>): Promise<T>;
}

export class Auth implements Tokens {
  private current: Session | null = null;
  private inflight: Promise<Session | null> | null = null;
  private listeners = new Set<(session: Session | null) => void>();
  private readonly key: string;
  private readonly now: () => number;

  constructor(private readonly http: Http, private readonly app: string, private readonly opts: AuthOptions = {}) {
    this.key = opts.storageKey ?? `authoric.${app}.session`;
    this.now = opts.now ?? Date.now;
    this.current = this.load();
  }

  /** The session as it stands (null: signed out). */
  get session(): Session | null {
    this.adopt();
    return this.current;
  }

  async signIn(credentials: { email: string; password: string; org?: string }): Promise<Session> {
    const pair = await this.http.json<TokenPair>("POST", `/${this.app}/auth/token`, { json: credentials, auth: false });
    return this.setSession(pair) as Session;
  }

  /** Accepts an invitation (section 3a) with the token from its mail: `password` creates the
   * account (or proves an existing one; signed in as it, none is needed). Signs in to the org. */
  async acceptInvitation(body: { token: string; password?: string }): Promise<Session> {
    const pair = await this.http.json<TokenPair>("POST", `/${this.app}/auth/invitations/accept`, {
      json: body, auth: this.current !== null,
    });
    return this.setSession(pair) as Session;
  }

  /** Revokes the refresh token on the server and forgets the session. */
  async signOut(): Promise<void> {
    const session = this.session;
    this.setSession(null);
    if (session?.refreshToken) {
      await this.http.json("POST", `/${this.app}/auth/logout`, { json: { refresh_token: session.refreshToken }, auth: false });
    }
  }

  /** Creates an account (the app's `signUp` must be "open"). With verification required, a
   * mail goes to `email` and nothing else happens until its link is opened; with it off, the
   * new account is signed in. */
  async signUp(credentials: { email: string; password: string }): Promise<SignUpResult> {
    const res = await this.http.send("POST", this.path("/auth/signup"), { json: credentials, auth: false });
    const answer = (await res.json()) as TokenPair | { status: "verification_sent" };
    if ("access_token" in answer) return { status: "signed_in", session: this.setSession(answer) as Session };
    return { status: "verification_sent" };
  }

  /** Redeems the token of a verify mail's link. */
  async verifyEmail(token: string): Promise<void> {
    await this.http.json("POST", this.path("/auth/verify"), { json: { token }, auth: false });
  }

  /** Sends the verify mail again (the answer is the same whether or not the email has an account). */
  async resendVerification(email: string): Promise<void> {
    await this.http.json("POST", this.path("/auth/verify/resend"), { json: { email }, auth: false });
  }

  /** Sends a password-reset mail to `email` if it has an account (the answer is the same either way). */
  async requestPasswordReset(email: string): Promise<void> {
    await this.http.json("POST", this.path("/auth/password/forgot"), { json: { email }, auth: false });
  }

  /** Sets a new password with the token of a reset mail's link: every session of the account ends. */
  async resetPassword(token: string, password: string): Promise<void> {
    await this.http.json("POST", this.path("/auth/password/reset"), { json: { token, password }, auth: false });
  }

  /** Changes the signed-in user's password: their other sessions end, this one stays. */
  async changePassword(current: string, password: string): Promise<void> {
    await this.http.json("POST", this.path("/auth/password"), { json: { current, password } });
  }

  /** Who is signed in: the user, this session's org and roles, memberships and invitations. */
  me(): Promise<Me> {
    return this.http.json("GET", this.path("/auth/me"));
  }

  /** The user's sessions, one per sign-in. */
  async sessions(): Promise<SessionInfo[]> {
    return (await this.http.json<{ items: SessionInfo[] }>("GET", this.path("/auth/sessions"))).items;
  }

  /** Ends one of the user's sessions (another device's, say). */
  async endSession(id: string): Promise<void> {
    await this.http.send("DELETE", this.path(`/auth/sessions/${encodeURIComponent(id)}`));
  }

  /** Signs in to another org of the user's (a new session; the previous one stays valid). */
  async switchOrg(org: string): Promise<Session> {
    const pair = await this.http.json<TokenPair>("POST", this.path("/auth/switch"), { json: { org } });
    return this.setSession(pair) as Session;
  }

  private path(suffix: string): string {
    return `/${encodeURIComponent(this.app)}${suffix}`;
  }

  /** Uses a token pair obtained elsewhere (or null to forget the session). */
  setSession(pair: TokenPair | Session | null): Session | null {
    let session: Session | null = null;
    if (pair && "accessToken" in pair) session = pair;
    else if (pair) {
      const lifetime = pair.expires_in * 1000;
      session = { accessToken: pair.access_token, refreshToken: pair.refresh_token ?? null, expiresAt: this.now() + lifetime, lifetime };
    }
    this.current = session;
    const store = this.opts.storage;
    if (store) session ? store.setItem(this.key, JSON.stringify(session)) : store.removeItem(this.key);
    for (const cb of this.listeners) cb(session);
    return session;
  }

  /** Called with the new session after sign-in and every refresh, and with null on sign-out
   * or when the session is revoked. Returns a function that stops the calls. */
  onChange(cb: (session: Session | null) => void): () => void {
    this.listeners.add(cb);
    return () => this.listeners.delete(cb);
  }

  /** Refreshes now (one refresh at a time: concurrent callers share it). */
  refresh(): Promise<Session | null> {
    const used = this.session?.accessToken ?? null;
    return this.refreshFrom(used);
  }

  async token(): Promise<string | null> {
    const session = this.session;
    if (!session) return null;
    if (this.now() < session.expiresAt - session.lifetime / 10 || !session.refreshToken) return session.accessToken;
    try {
      return (await this.refreshFrom(session.accessToken))?.accessToken ?? null;
    } catch (err) {
      // The server could not be reached: the token may still be good for a while.
      if (err instanceof AuthoricError && err.status === 0 && this.now() < session.expiresAt) return session.accessToken;
      throw err;
    }
  }

  async expired(used: string): Promise<string | null> {
    return (await this.refreshFrom(used))?.accessToken ?? null;
  }

  /** A session whose access token is not `used`: someone else's refresh, or ours. */
  private refreshFrom(used: string | null): Promise<Session | null> {
    const session = this.session;
    if (session && session.accessToken !== used) return Promise.resolve(session);
    if (!this.inflight) {
      const run = () => this.rotate(used);
      const locks = (globalThis as { navigator?: { locks?: Locks } }).navigator?.locks;
      const job = this.opts.storage && locks ? locks.request(this.key, run) : run();
      this.inflight = job.finally(() => (this.inflight = null));
    }
    return this.inflight;
  }

  private async rotate(used: string | null): Promise<Session | null> {
    const session = this.session; // re-read: another tab may have rotated meanwhile
    if (!session) return null;
    if (session.accessToken !== used) return session;
    if (!session.refreshToken) return null;
    try {
      const pair = await this.http.json<TokenPair>("POST", `/${this.app}/auth/refresh`, {
        json: { refresh_token: session.refreshToken }, auth: false,
      });
      return this.setSession(pair);
    } catch (err) {
      if (err instanceof AuthoricError && err.status === 401) this.setSession(null); // revoked: signed out
      throw err;
    }
  }

  private load(): Session | null {
    const raw = this.opts.storage?.getItem(this.key);
    if (!raw) return null;
    try {
      return JSON.parse(raw) as Session;
    } catch {
      return null;
    }
  }

  /** Takes the pair another tab stored, if it changed. */
  private adopt(): void {
    if (!this.opts.storage) return;
    const stored = this.load();
    if (stored?.accessToken !== this.current?.accessToken) this.current = stored;
  }
}
