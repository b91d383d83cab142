"""table indexes (owner-defined, built concurrently, with a state) and full-text search functions

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-04
"""
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "table_indexes",
        sa.Column("app_uid", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("table_name", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("spec", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("error", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("builder_pid", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"),
                  nullable=False),
        sa.ForeignKeyConstraint(["app_uid", "table_name"],
                                ["authoric.app_tables.app_uid", "authoric.app_tables.name"],
                                ondelete="CASCADE", onupdate="CASCADE"),
        sa.PrimaryKeyConstraint("app_uid", "table_name", "name"),
        schema="authoric",
    )
    # Full-text search, language-neutral (`simple`) and accent-insensitive, with no extension
    # (the embedded PostgreSQL has no contrib modules): `search_fold` decomposes (NFKD) and
    # drops combining marks, then folds the few letters that do not decompose. Every function
    # it calls is IMMUTABLE, so an index may hold `search_vector(column)`.
    op.execute(r"""
CREATE FUNCTION authoric.search_fold(text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT replace(replace(replace(replace(replace(
    pg_catalog.translate(pg_catalog.regexp_replace(pg_catalog.normalize($1, 'NFKD'),
                                                   '[\u0300-\u036f]', '', 'g'),
                         'ØøŁłĐđĦħı', 'OoLlDdHhi'),
    'ß', 'ss'), 'Æ', 'AE'), 'æ', 'ae'), 'Œ', 'OE'), 'œ', 'oe') $$""")
    op.execute("""
CREATE FUNCTION authoric.search_vector(text) RETURNS tsvector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT pg_catalog.to_tsvector('pg_catalog.simple'::regconfig, authoric.search_fold($1)) $$""")
    op.execute("""
CREATE FUNCTION authoric.search_query(text) RETURNS tsquery
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT pg_catalog.websearch_to_tsquery('pg_catalog.simple'::regconfig,
                                            authoric.search_fold($1)) $$""")


def downgrade() -> None:
    op.execute("DROP FUNCTION IF EXISTS authoric.search_query(text)")
    op.execute("DROP FUNCTION IF EXISTS authoric.search_vector(text)")
    op.execute("DROP FUNCTION IF EXISTS authoric.search_fold(text)")
    op.drop_table("table_indexes", schema="authoric")
