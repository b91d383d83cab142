"""audit log: every admin change, admin row write and impersonation, per app

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03
"""
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # No foreign key to apps: deleting an app neither fails on nor erases its history.
    op.create_table(
        "audit_log",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("app_uid", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), server_default=sa.text("now()"),
                  nullable=False),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("details", postgresql.JSONB(astext_type=sa.Text()),
                  server_default=sa.text("'{}'::jsonb"), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        schema="authoric",
    )
    op.create_index("audit_log_app_id", "audit_log", ["app_uid", "id"], schema="authoric")


def downgrade() -> None:
    op.drop_index("audit_log_app_id", table_name="audit_log", schema="authoric")
    op.drop_table("audit_log", schema="authoric")
