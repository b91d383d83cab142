"""tenancy: orgs run by their members (grants, invitations, audit actors) and API keys

- `roles.grants`: the roles a role's holders may hand out (section 3a's ceiling).
- `members.joined_at`: when the membership began (`joinedAt` in the org's member list).
- `api_keys`: a key acts in one org with its roles; only the SHA-256 of the key is kept, and
  a request finds it by that hash through the unique index.
- `invitations`: pending invitations by email, each with the SHA-256 of its mailed token;
  accepting one deletes it in the statement that checks it (single use).
- `audit_log.actor`: who made the change (`{"kind": "operator"}` for every older entry).

Revision ID: 0012_tenancy
Revises: 0011_accounts
Create Date: 2026-12-07
"""
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0012_tenancy"
down_revision = "0011_accounts"
branch_labels = None
depends_on = None

UUID = postgresql.UUID(as_uuid=True)
STAMP = sa.DateTime(timezone=True)
JSONB = postgresql.JSONB(astext_type=sa.Text())


def _app() -> sa.Column:
    return sa.Column("app_uid", UUID, sa.ForeignKey("authoric.apps.uid", ondelete="CASCADE"),
                     nullable=False)


def _org() -> sa.Column:
    return sa.Column("org_uid", UUID, sa.ForeignKey("authoric.orgs.uid", ondelete="CASCADE"),
                     nullable=False)


def upgrade() -> None:
    op.add_column("roles", sa.Column("grants", JSONB, nullable=False,
                                     server_default=sa.text("'[]'::jsonb")), schema="authoric")
    op.add_column("members", sa.Column("joined_at", STAMP, nullable=False,
                                       server_default=sa.func.now()), schema="authoric")
    op.add_column("audit_log", sa.Column("actor", JSONB, nullable=False,
                                         server_default=sa.text("""'{"kind": "operator"}'::jsonb""")),
                  schema="authoric")
    op.create_table(
        "api_keys",
        sa.Column("uid", UUID, primary_key=True),
        _app(), _org(),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("roles", postgresql.ARRAY(sa.Text), nullable=False),
        sa.Column("key_hash", sa.LargeBinary, nullable=False, unique=True),
        sa.Column("created_at", STAMP, nullable=False, server_default=sa.func.now()),
        sa.Column("expires_at", STAMP),
        sa.Column("last_used_at", STAMP),
        sa.Column("created_by", JSONB, nullable=False),
        schema="authoric")
    op.create_index("api_keys_org", "api_keys", ["org_uid", "uid"], schema="authoric")
    op.create_table(
        "invitations",
        sa.Column("uid", UUID, primary_key=True),
        _app(), _org(),
        sa.Column("email", sa.Text, nullable=False),
        sa.Column("roles", postgresql.ARRAY(sa.Text), nullable=False),
        sa.Column("invited_by", UUID),
        sa.Column("token_hash", sa.LargeBinary, nullable=False, unique=True),
        sa.Column("created_at", STAMP, nullable=False, server_default=sa.func.now()),
        sa.Column("expires_at", STAMP, nullable=False),
        sa.UniqueConstraint("org_uid", "email"),
        schema="authoric")
    op.create_index("invitations_email", "invitations", ["app_uid", "email"], schema="authoric")


def downgrade() -> None:
    op.drop_table("invitations", schema="authoric")
    op.drop_table("api_keys", schema="authoric")
    op.drop_column("audit_log", "actor", schema="authoric")
    op.drop_column("members", "joined_at", schema="authoric")
    op.drop_column("roles", "grants", schema="authoric")
