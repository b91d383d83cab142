"""SQL capture of TRUNCATE: a captured table's TRUNCATE files one `bulk` change per org of
the app (their streams resync), like a statement touching more than 1,000 rows

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04
"""
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

# Installed per table by changes/capture.py (AFTER TRUNCATE FOR EACH STATEMENT: the rows are
# gone by then, so every org of the app is told). TG_ARGV: app uid, table name.
TRUNCATE = r"""
CREATE OR REPLACE FUNCTION authoric.capture_sql_truncate() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    IF current_setting('authoric.platform_write', true) = 'on' THEN
        RETURN NULL;
    END IF;
    INSERT INTO authoric.changes (app_uid, table_name, op, org_uid)
    SELECT o.app_uid, TG_ARGV[1], 'bulk', o.uid FROM authoric.orgs o
    WHERE o.app_uid = TG_ARGV[0]::uuid;
    RETURN NULL;
END
$fn$
"""

# Tables captured before this revision get the trigger too.
INSTALL = r"""
DO $do$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT app_uid, name FROM authoric.app_tables
             WHERE definition ->> 'captureSqlWrites' = 'true' LOOP
        EXECUTE format('CREATE TRIGGER authoric_capture_trunc AFTER TRUNCATE ON %I.%I '
                       'FOR EACH STATEMENT EXECUTE FUNCTION '
                       'authoric.capture_sql_truncate(%L, %L)',
                       'app_' || replace(r.app_uid::text, '-', ''), r.name,
                       r.app_uid::text, r.name);
    END LOOP;
END
$do$
"""


def upgrade() -> None:
    op.execute(TRUNCATE)
    op.execute(INSTALL)


def downgrade() -> None:
    op.execute("DROP FUNCTION IF EXISTS authoric.capture_sql_truncate() CASCADE")
