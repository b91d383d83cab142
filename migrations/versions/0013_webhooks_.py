"""webhooks: each webhook with its cursor in the change log and its lease, and its deliveries

Revision ID: 0013_webhooks
Revises: 0012_tenancy (re-chained after main landed 0011 and 0012 on 0009)
Create Date: 2026-12-07
"""
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0013_webhooks"
down_revision = "0012_tenancy"
branch_labels = None
depends_on = None

UID = postgresql.UUID(as_uuid=True)
WHEN = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "webhooks",
        sa.Column("uid", UID, nullable=False),
        sa.Column("app_uid", UID, nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("tables", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("ops", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("org_uid", UID, nullable=True),
        sa.Column("role", sa.Text(), nullable=True),
        sa.Column("expand", postgresql.ARRAY(sa.Text()), nullable=False,
                  server_default=sa.text("'{}'::text[]")),
        sa.Column("status", sa.Text(), nullable=False, server_default=sa.text("'active'")),
        sa.Column("secret", sa.Text(), nullable=False),
        sa.Column("cursor", sa.BigInteger(), nullable=False),
        sa.Column("resync_first", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("attempt", sa.Integer(), nullable=False, server_default=sa.text("0")),
        sa.Column("failing_since", WHEN, nullable=True),
        sa.Column("next_attempt_at", WHEN, nullable=True),
        sa.Column("lease_owner", UID, nullable=True),
        sa.Column("lease_until", WHEN, nullable=True),
        sa.Column("created_at", WHEN, server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(["app_uid"], ["authoric.apps.uid"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("uid"),
        schema="authoric",
    )
    op.create_index("webhooks_app", "webhooks", ["app_uid"], schema="authoric")
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("webhook_uid", UID, nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("at", WHEN, server_default=sa.text("now()"), nullable=False),
        sa.Column("status", sa.Integer(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("duration_ms", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["webhook_uid"], ["authoric.webhooks.uid"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        schema="authoric",
    )
    op.create_index("webhook_deliveries_webhook_id", "webhook_deliveries", ["webhook_uid", "id"],
                    schema="authoric")


def downgrade() -> None:
    op.drop_index("webhook_deliveries_webhook_id", table_name="webhook_deliveries",
                  schema="authoric")
    op.drop_table("webhook_deliveries", schema="authoric")
    op.drop_index("webhooks_app", table_name="webhooks", schema="authoric")
    op.drop_table("webhooks", schema="authoric")
