"""accounts: verified emails, account sessions, mailed tokens and the mail outbox

- `users.email_verified_at`: when the user proved the address (operator-created users, and
  users before this revision, count as verified from their creation).
- `refresh_tokens.org_uid` may be NULL: an account token's session belongs to no org.
  `created_at` and `user_agent` describe a session (one per family) in `GET /auth/sessions`.
- `mail_tokens`: tokens sent by mail (verify, reset; tenancy's invitations), kept only as the
  SHA-256 of the 32 random bytes, single-use (`used_at`) and expiring.
- `mail_outbox`: every mail, written in the transaction of the change that causes it, sent by
  one sender after commit (mail/sender.py); without SMTP it is the app's mailbox.

Revision ID: 0011_accounts
Revises: 0009
Create Date: 2026-12-07
"""
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0011_accounts"
down_revision = "0009"
branch_labels = None
depends_on = None

UUID = postgresql.UUID(as_uuid=True)
STAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.add_column("users", sa.Column("email_verified_at", STAMP), schema="authoric")
    op.execute("UPDATE authoric.users SET email_verified_at = created_at")
    op.alter_column("refresh_tokens", "org_uid", nullable=True, schema="authoric")
    op.add_column("refresh_tokens", sa.Column("created_at", STAMP, nullable=False,
                                              server_default=sa.func.now()), schema="authoric")
    op.add_column("refresh_tokens", sa.Column("user_agent", sa.Text), schema="authoric")
    op.create_table(
        "mail_tokens",
        sa.Column("hash", sa.LargeBinary, primary_key=True),
        sa.Column("app_uid", UUID, sa.ForeignKey("authoric.apps.uid", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("purpose", sa.Text, nullable=False),
        sa.Column("user_uid", UUID, sa.ForeignKey("authoric.users.uid", ondelete="CASCADE")),
        sa.Column("subject", sa.Text),
        sa.Column("data", postgresql.JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("expires_at", STAMP, nullable=False),
        sa.Column("used_at", STAMP),
        sa.Column("created_at", STAMP, nullable=False, server_default=sa.func.now()),
        schema="authoric")
    op.create_index("mail_tokens_user", "mail_tokens", ["user_uid", "purpose"], schema="authoric")
    op.create_index("mail_tokens_expires", "mail_tokens", ["expires_at"], schema="authoric")
    op.create_table(
        "mail_outbox",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
        sa.Column("app_uid", UUID, sa.ForeignKey("authoric.apps.uid", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("at", STAMP, nullable=False, server_default=sa.func.now()),
        sa.Column("mail_from", sa.Text, nullable=False),
        sa.Column("mail_to", sa.Text, nullable=False),
        sa.Column("subject", sa.Text, nullable=False),
        sa.Column("text_body", sa.Text),
        sa.Column("html_body", sa.Text),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("next_attempt_at", STAMP, nullable=False, server_default=sa.func.now()),
        sa.Column("error", sa.Text),
        sa.Column("sent_at", STAMP),
        schema="authoric")
    op.create_index("mail_outbox_app_id", "mail_outbox", ["app_uid", "id"], schema="authoric")
    op.create_index("mail_outbox_due", "mail_outbox", ["next_attempt_at"], schema="authoric",
                    postgresql_where=sa.text("status = 'pending'"))


def downgrade() -> None:
    op.drop_table("mail_outbox", schema="authoric")
    op.drop_table("mail_tokens", schema="authoric")
    op.drop_column("refresh_tokens", "user_agent", schema="authoric")
    op.drop_column("refresh_tokens", "created_at", schema="authoric")
    op.execute("DELETE FROM authoric.refresh_tokens WHERE org_uid IS NULL")
    op.alter_column("refresh_tokens", "org_uid", nullable=False, schema="authoric")
    op.drop_column("users", "email_verified_at", schema="authoric")
