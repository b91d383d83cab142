"""membership uid and stream leases

- `members.uid`: an access token names the membership it was issued for. Removing a member
  and adding them back makes a new membership (a new uid), which access and impersonation
  tokens issued for the old one (claim `mid`) do not reach.
- `stream_leases` (UNLOGGED): one row per open subscribe stream, renewed by its process, so
  the per-user stream cap holds across workers and replicas (realtime/stream_leases.py).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04
"""
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A volatile default fills existing rows one by one (a table rewrite of a small table).
    op.add_column("members", sa.Column("uid", postgresql.UUID(as_uuid=True), nullable=False,
                                       server_default=sa.text("gen_random_uuid()")),
                  schema="authoric")
    op.create_table(
        "stream_leases",
        sa.Column("id", postgresql.UUID(as_uuid=True), primary_key=True),
        sa.Column("app_uid", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("user_uid", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("process", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        schema="authoric", prefixes=["UNLOGGED"])
    op.create_index("stream_leases_user", "stream_leases", ["app_uid", "user_uid"],
                    schema="authoric")


def downgrade() -> None:
    op.drop_table("stream_leases", schema="authoric")
    op.drop_column("members", "uid", schema="authoric")
