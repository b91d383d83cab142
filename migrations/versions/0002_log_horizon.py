"""log horizon: remembers how far retention has trimmed the change log

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02
"""
import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "log_horizon",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("pos", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        schema="authoric",
    )
    op.execute("INSERT INTO authoric.log_horizon (id, pos) VALUES (1, 0)")


def downgrade() -> None:
    op.drop_table("log_horizon", schema="authoric")
