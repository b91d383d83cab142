"""Search reads a bounded prefix of each value, and search indexes lead with the org
(security round four, findings 2 and 3)

- `authoric.search_vector` folds and indexes the first SEARCHED_CHARACTERS characters of a
  value: no single value can make its tsvector exceed PostgreSQL's 1 MB limit (SQLSTATE
  54000), which switched search off, for a whole org, for every search that met the row.
- Every search index becomes `gin ((ARRAY[org_uid]), authoric.search_vector(col), ...)`: a
  multi-word search's subquery carries the org (query/filters.py) and the index answers it
  within the org, so its time no longer follows other orgs' matches.

Existing search indexes are rebuilt here: they held the unbounded expression, and their
shape was not org-led.

Revision ID: 0010_sec
Revises: 0013_webhooks
Create Date: 2026-12-07
"""
from alembic import op
from sqlalchemy import text

revision = "0010_sec"
down_revision = "0013_webhooks"  # the chain: 0009, 0011 accounts, 0012 tenancy, 0013 webhooks, this
branch_labels = None
depends_on = None

SEARCHED_CHARACTERS = 100_000  # docs/security.md; tables/indexes.py says the same

BOUNDED = f"""
CREATE OR REPLACE FUNCTION authoric.search_vector(text) RETURNS tsvector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT pg_catalog.to_tsvector('pg_catalog.simple'::regconfig,
    pg_catalog.left(authoric.search_fold(pg_catalog.left($1, {SEARCHED_CHARACTERS})),
                    {SEARCHED_CHARACTERS})) $$"""

UNBOUNDED = """
CREATE OR REPLACE FUNCTION authoric.search_vector(text) RETURNS tsvector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT pg_catalog.to_tsvector('pg_catalog.simple'::regconfig, authoric.search_fold($1)) $$"""

SEARCH_INDEXES = """
SELECT n.nspname AS schema, c.relname AS name, pg_catalog.pg_get_indexdef(c.oid) AS definition
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'i' AND n.nspname LIKE 'app\\_%'
  AND pg_catalog.pg_get_indexdef(c.oid) LIKE '%USING gin (%authoric.search_vector(%'"""

ORG_LED = "USING gin ((ARRAY[org_uid]), "


def _rebuild(org_led: bool) -> None:
    bind = op.get_bind()
    for row in bind.execute(text(SEARCH_INDEXES)).mappings().all():
        definition = row["definition"]
        if org_led and ORG_LED not in definition:
            definition = definition.replace("USING gin (", ORG_LED, 1)
        elif not org_led:
            definition = definition.replace(ORG_LED, "USING gin (", 1)
        op.execute(f'DROP INDEX "{row["schema"]}"."{row["name"]}"')
        op.execute(definition)


def upgrade() -> None:
    op.execute(BOUNDED)
    _rebuild(org_led=True)


def downgrade() -> None:
    op.execute(UNBOUNDED)
    _rebuild(org_led=False)
