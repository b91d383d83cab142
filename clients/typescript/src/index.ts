/** `@authoric/client`: sessions, autocrud, change streams and live queries for one app. */
export { createClient, Client, Orgs, Table, listParams, type ClientOptions } from "./client.js";
export { AuthoricError } from "./errors.js";
export type { FetchLike } from "./http.js";
export type { Auth, Me, Session, SessionInfo, SessionStorage, SignUpResult, TokenPair } from "./auth.js";
export type { Subscription, StreamOptions } from "./stream.js";
export type { Org, OrgMember, Invitation, ApiKey, NewApiKey } from "./org.js";
export type { LiveQuery, LiveQueryOptions } from "./live.js";
export type * from "./types.js";
