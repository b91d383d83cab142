"""login throttle counts shared by all processes; indexes to revoke and purge refresh tokens

Revision ID: 0004
Revises: 0002
Create Date: 2026-12-03
"""
import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "login_throttle",
        sa.Column("app_uid", sa.UUID(), nullable=False),
        sa.Column("key", sa.LargeBinary(), nullable=False),
        sa.Column("window_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("hits", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("app_uid", "key"),
        prefixes=["UNLOGGED"],
        schema="authoric",
    )
    op.create_index("refresh_tokens_user", "refresh_tokens", ["user_uid"], schema="authoric")
    op.create_index("refresh_tokens_expires", "refresh_tokens", ["expires_at"],
                    schema="authoric")


def downgrade() -> None:
    op.drop_index("refresh_tokens_expires", "refresh_tokens", schema="authoric")
    op.drop_index("refresh_tokens_user", "refresh_tokens", schema="authoric")
    op.drop_table("login_throttle", schema="authoric")
