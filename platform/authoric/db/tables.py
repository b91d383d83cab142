"""Platform tables (schema `authoric`): the metadata Alembic migrates and services query.

User-defined tables live elsewhere, one PostgreSQL schema per app (see `catalog.ddl`).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    UniqueConstraint,
    false,
    func,
    select,
    text,
    union_all,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID

SCHEMA = "authoric"
metadata = MetaData(schema=SCHEMA)


def _created() -> Column[object]:
    return Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now())


apps = Table(
    "apps", metadata,
    Column("uid", UUID(as_uuid=True), primary_key=True),
    Column("name", Text, nullable=False, unique=True),
    Column("settings", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    # Bumped by every change to roles, members or tables; caches are keyed by it.
    Column("version", BigInteger, nullable=False, server_default=text("1")),
    _created(),
)


def _app_uid() -> Column[object]:
    """The app a row belongs to; deleting the app deletes the row."""
    return Column("app_uid", UUID(as_uuid=True), ForeignKey(apps.c.uid, ondelete="CASCADE"),
                  nullable=False)


app_tables = Table(
    "app_tables", metadata,
    _app_uid(),
    Column("name", Text, nullable=False),
    Column("definition", JSONB, nullable=False),
    _created(),
    PrimaryKeyConstraint("app_uid", "name"),
)

# Indexes an app owner defines on a table (tables/indexes.py). Built with CREATE INDEX
# CONCURRENTLY outside any transaction, so the state lives here: `building`, `ready`, or
# `failed` with `error` (the contract's error object). `builder_pid` is the backend that builds
# it, so a build whose process died is seen as interrupted by any replica.
table_indexes = Table(
    "table_indexes", metadata,
    Column("app_uid", UUID(as_uuid=True), nullable=False),
    Column("table_name", Text, nullable=False),
    Column("name", Text, nullable=False),
    Column("spec", JSONB, nullable=False),
    Column("state", Text, nullable=False),
    Column("error", JSONB),
    Column("builder_pid", Integer),
    _created(),
    PrimaryKeyConstraint("app_uid", "table_name", "name"),
    ForeignKeyConstraint(["app_uid", "table_name"], [app_tables.c.app_uid, app_tables.c.name],
                         ondelete="CASCADE", onupdate="CASCADE"),
)

orgs = Table(
    "orgs", metadata,
    Column("uid", UUID(as_uuid=True), primary_key=True),
    _app_uid(),
    Column("name", Text, nullable=False),
    _created(),
    UniqueConstraint("app_uid", "name"),
)


def _org_uid() -> Column[object]:
    """The org a row belongs to; deleting the org deletes the row."""
    return Column("org_uid", UUID(as_uuid=True), ForeignKey(orgs.c.uid, ondelete="CASCADE"),
                  nullable=False)


users = Table(
    "users", metadata,
    Column("uid", UUID(as_uuid=True), primary_key=True),
    _app_uid(),
    Column("email", Text, nullable=False),
    Column("password_hash", Text, nullable=False),
    # When the user proved the address (a verify link, an invitation, or the operator made it).
    Column("email_verified_at", DateTime(timezone=True)),
    _created(),
    UniqueConstraint("app_uid", "email"),
)

members = Table(
    "members", metadata,
    _app_uid(),
    _org_uid(),
    Column("user_uid", UUID(as_uuid=True), ForeignKey(users.c.uid, ondelete="CASCADE"),
           nullable=False),
    Column("roles", ARRAY(Text), nullable=False),
    # This membership's identity: removing the member and adding them back makes a new one,
    # which the access tokens issued for the old one (claim `mid`) do not reach.
    Column("uid", UUID(as_uuid=True), nullable=False, server_default=text("gen_random_uuid()")),
    Column("joined_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    PrimaryKeyConstraint("org_uid", "user_uid"),
)

roles = Table(
    "roles", metadata,
    _app_uid(),
    Column("name", Text, nullable=False),
    Column("permissions", JSONB, nullable=False),
    Column("row_policies", JSONB, nullable=False),
    Column("redact", JSONB, nullable=False),
    # The roles this role's holders may hand out in their org (section 3a's ceiling).
    Column("grants", JSONB, nullable=False, server_default=text("'[]'::jsonb")),
    PrimaryKeyConstraint("app_uid", "name"),
)

refresh_tokens = Table(
    "refresh_tokens", metadata,
    Column("jti", UUID(as_uuid=True), primary_key=True),
    Column("family", UUID(as_uuid=True), nullable=False, index=True),
    _app_uid(),
    Column("user_uid", UUID(as_uuid=True), nullable=False),
    Column("org_uid", UUID(as_uuid=True)),  # NULL: an account token's session (no org)
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("spent_at", DateTime(timezone=True)),
    Column("revoked_at", DateTime(timezone=True)),
    # A session is a family: its first row's time is when it began, its last row's when it
    # was last refreshed (`GET /auth/sessions`).
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("user_agent", Text),
    # Revoking a user's sessions, and purging expired rows, must not scan the table.
    Index("refresh_tokens_user", "user_uid"),
    Index("refresh_tokens_expires", "expires_at"),
)

# Login attempts per fixed window, shared by every worker and replica (auth.ratelimit).
# UNLOGGED: counts may be lost in a crash, which only forgives a minute of attempts.
login_throttle = Table(
    "login_throttle", metadata,
    Column("app_uid", UUID(as_uuid=True), nullable=False),
    Column("key", LargeBinary, nullable=False),  # sha256 of (kind, subject): bounded size
    Column("window_start", DateTime(timezone=True), nullable=False),
    Column("hits", Integer, nullable=False),
    PrimaryKeyConstraint("app_uid", "key"),
    prefixes=["UNLOGGED"],
)

# One row per open subscribe stream of a user, renewed by the process serving it: the per-user
# stream cap across workers and replicas (realtime.stream_leases). UNLOGGED: after a crash
# every stream has ended anyway.
stream_leases = Table(
    "stream_leases", metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("app_uid", UUID(as_uuid=True), nullable=False),
    Column("user_uid", UUID(as_uuid=True), nullable=False),
    Column("process", UUID(as_uuid=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Index("stream_leases_user", "app_uid", "user_uid"),
    prefixes=["UNLOGGED"],
)

# The change log (outbox). Writers insert rows with `pos` NULL inside their own
# transaction; the sequencer stamps `pos` in commit order (see changes.sequencer).
changes = Table(
    "changes", metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("pos", BigInteger, unique=True),
    Column("app_uid", UUID(as_uuid=True), nullable=False),
    Column("table_name", Text, nullable=False),
    Column("op", Text, nullable=False),
    Column("row_uid", UUID(as_uuid=True)),
    Column("org_uid", UUID(as_uuid=True), nullable=False),
    Column("actor_uid", UUID(as_uuid=True)),
    Column("old_row", JSONB),
    _created(),
    Index("changes_unstamped", "id", postgresql_where=text("pos IS NULL")),
    Index("changes_app_pos", "app_uid", "pos"),
)

# One row: the highest position the retention job has deleted. A resume from below it
# has lost entries (`backfill_expired`).
log_horizon = Table(
    "log_horizon", metadata,
    Column("id", BigInteger, primary_key=True),
    Column("pos", BigInteger, nullable=False),
)

# The admin audit log (console/audit.py): one row per admin change, row write or impersonation.
# No foreign key to `apps`: deleting an app must not fail on, or silently erase, its history.
audit_log = Table(
    "audit_log", metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("app_uid", UUID(as_uuid=True), nullable=False),
    Column("at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("action", Text, nullable=False),
    Column("target", Text, nullable=False),
    Column("details", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    # Who made the change: {"kind": "operator"}, {"kind": "member", "user", "org"} or
    # {"kind": "key", "key", "org"} (tenancy/actors.py).
    Column("actor", JSONB, nullable=False,
           server_default=text("""'{"kind": "operator"}'::jsonb""")),
    Index("audit_log_app_id", "app_uid", "id"),
)

# Webhooks (webhooks/): an app's changes POSTed to a URL in position order. `cursor` is the
# last position delivered (or judged invisible), advanced in the transaction that records
# its delivery; `lease_owner`/`lease_until` say which process delivers it (one at a time).
webhooks = Table(
    "webhooks", metadata,
    Column("uid", UUID(as_uuid=True), primary_key=True),
    _app_uid(),
    Column("url", Text, nullable=False),
    Column("tables", ARRAY(Text), nullable=False),
    Column("ops", ARRAY(Text), nullable=False),
    Column("org_uid", UUID(as_uuid=True)),
    Column("role", Text),
    Column("expand", ARRAY(Text), nullable=False, server_default=text("'{}'::text[]")),
    Column("status", Text, nullable=False, server_default=text("'active'")),
    Column("secret", Text, nullable=False),
    Column("cursor", BigInteger, nullable=False),
    # Set by a resume that finds the log no longer holds the cursor: `backfill_expired` first.
    Column("resync_first", Boolean, nullable=False, server_default=false()),
    Column("attempt", Integer, nullable=False, server_default=text("0")),
    Column("failing_since", DateTime(timezone=True)),
    Column("next_attempt_at", DateTime(timezone=True)),
    Column("lease_owner", UUID(as_uuid=True)),
    Column("lease_until", DateTime(timezone=True)),
    _created(),
    Index("webhooks_app", "app_uid"),
)

# Every attempt to deliver one position to one webhook (`status` NULL: no HTTP answer).
webhook_deliveries = Table(
    "webhook_deliveries", metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("webhook_uid", UUID(as_uuid=True), ForeignKey("authoric.webhooks.uid",
                                                         ondelete="CASCADE"), nullable=False),
    Column("position", BigInteger, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("status", Integer),
    Column("error", Text),
    Column("duration_ms", Float, nullable=False),
    Index("webhook_deliveries_webhook_id", "webhook_uid", "id"),
)


def _roles_granted_in_org(secret_hash: str) -> list[Column[object]]:
    """A grant of roles in one org (an API key, an invitation), carried by a secret of which
    only the SHA-256 is kept, under `secret_hash`: unique, the grant is found by it."""
    return [Column("uid", UUID(as_uuid=True), primary_key=True), _app_uid(), _org_uid(),
            Column("roles", ARRAY(Text), nullable=False),
            Column(secret_hash, LargeBinary, nullable=False, unique=True)]


# API keys (section 3b): a key acts in one org with its roles, as a member would. Only the
# SHA-256 of the key is kept; a request finds its key by that hash through the unique index.
# Revoking deletes the row, so the request path's guard (plan/guard.py) refuses it at once.
api_keys = Table(
    "api_keys", metadata,
    *_roles_granted_in_org("key_hash"),
    Column("name", Text, nullable=False),
    _created(),
    Column("expires_at", DateTime(timezone=True)),
    Column("last_used_at", DateTime(timezone=True)),
    Column("created_by", JSONB, nullable=False),
    Index("api_keys_org", "org_uid", "uid"),
)

# Pending invitations into an org (section 3a), one per (org, email); the mailed token is kept
# as its SHA-256 and accepting deletes the row in the statement that checks it.
invitations = Table(
    "invitations", metadata,
    *_roles_granted_in_org("token_hash"),
    Column("email", Text, nullable=False),
    Column("invited_by", UUID(as_uuid=True)),
    _created(),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("org_uid", "email"),
    Index("invitations_email", "app_uid", "email"),
)


def grantees() -> Any:
    """Whoever holds roles in an org, as one relation (app_uid, org_uid, user_uid, uid, roles):
    the members, and the API keys acting as principals whose user uid and membership uid are
    the key's uid. The request path's guard, the facts loader and the feed read principals
    through it, so a key is judged by the same plan as a member (section 3b)."""
    m, k = members, api_keys
    return union_all(
        select(m.c.app_uid, m.c.org_uid, m.c.user_uid, m.c.uid, m.c.roles),
        select(k.c.app_uid, k.c.org_uid, k.c.uid.label("user_uid"), k.c.uid, k.c.roles),
    ).subquery("grantees")

# Tokens sent by mail (accounts.mail_tokens): only the SHA-256 of the 32 random bytes is kept.
# `purpose` says what the token does (verify, reset; invitations may follow the same shape),
# `subject` what it is about (an email address), `data` anything else the purpose needs.
mail_tokens = Table(
    "mail_tokens", metadata,
    Column("hash", LargeBinary, primary_key=True),
    _app_uid(),
    Column("purpose", Text, nullable=False),
    Column("user_uid", UUID(as_uuid=True), ForeignKey(users.c.uid, ondelete="CASCADE")),
    Column("subject", Text),
    Column("data", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("used_at", DateTime(timezone=True)),
    _created(),
    Index("mail_tokens_user", "user_uid", "purpose"),
    Index("mail_tokens_expires", "expires_at"),
)

# Every mail (mail.outbox), written in the transaction of the change that causes it.
# `status`: `pending` (the sender will try, at `next_attempt_at`), `sent`, `failed` (`error`
# says why), or `mailbox` (no SMTP server: the app's mailbox is where it goes). Bodies of
# mail sent through SMTP are cleared once sent.
mail_outbox = Table(
    "mail_outbox", metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    _app_uid(),
    Column("at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("mail_from", Text, nullable=False),
    Column("mail_to", Text, nullable=False),
    Column("subject", Text, nullable=False),
    Column("text_body", Text),
    Column("html_body", Text),
    Column("status", Text, nullable=False),
    Column("attempts", Integer, nullable=False, server_default=text("0")),
    Column("next_attempt_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("error", Text),
    Column("sent_at", DateTime(timezone=True)),
    Index("mail_outbox_app_id", "app_uid", "id"),
    Index("mail_outbox_due", "next_attempt_at", postgresql_where=text("status = 'pending'")),
)
