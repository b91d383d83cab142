"""SQL capture: the trigger function that files direct SQL writes of captured tables in the
change log; every table definition carries `captureSqlWrites` and `sqlName`

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04
"""
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

# Installed per table by changes/capture.py (statement-level triggers with transition
# tables); skipped on the platform's own connections, which file their writes themselves.
# TG_ARGV: app uid, table name, 'soft' when the table soft-deletes.
CAPTURE = r"""
CREATE OR REPLACE FUNCTION authoric.capture_sql_writes() RETURNS trigger
LANGUAGE plpgsql AS $fn$
DECLARE
    app uuid := TG_ARGV[0]::uuid;
    tbl text := TG_ARGV[1];
    soft boolean := TG_ARGV[2] = 'soft';
    touched bigint;
BEGIN
    IF current_setting('authoric.platform_write', true) = 'on' THEN
        RETURN NULL;  -- the platform filed this write itself, in the same statement
    END IF;
    IF TG_OP = 'DELETE' THEN
        SELECT count(*) INTO touched FROM old_rows;
    ELSE
        SELECT count(*) INTO touched FROM new_rows;
    END IF;
    IF touched = 0 THEN
        RETURN NULL;
    END IF;
    IF touched > 1000 THEN
        IF TG_OP = 'INSERT' THEN
            INSERT INTO authoric.changes (app_uid, table_name, op, org_uid)
            SELECT DISTINCT app, tbl, 'bulk', org_uid FROM new_rows;
        ELSIF TG_OP = 'DELETE' THEN
            INSERT INTO authoric.changes (app_uid, table_name, op, org_uid)
            SELECT DISTINCT app, tbl, 'bulk', org_uid FROM old_rows;
        ELSE
            INSERT INTO authoric.changes (app_uid, table_name, op, org_uid)
            SELECT app, tbl, 'bulk', org_uid
            FROM (SELECT org_uid FROM old_rows UNION SELECT org_uid FROM new_rows) o;
        END IF;
    ELSIF TG_OP = 'INSERT' THEN
        INSERT INTO authoric.changes (app_uid, table_name, op, row_uid, org_uid)
        SELECT app, tbl, 'insert', n.uid, n.org_uid FROM new_rows n
        WHERE NOT soft OR to_jsonb(n) ->> 'deleted_at' IS NULL;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO authoric.changes (app_uid, table_name, op, row_uid, org_uid, old_row)
        SELECT app, tbl, 'delete', o.uid, o.org_uid, to_jsonb(o) FROM old_rows o
        WHERE NOT soft OR to_jsonb(o) ->> 'deleted_at' IS NULL;
    ELSE
        -- An update is a delete where the row leaves its org, is soft-deleted or changes uid
        -- (judged on the old image), and an insert where it arrives or is restored.
        INSERT INTO authoric.changes (app_uid, table_name, op, row_uid, org_uid, old_row)
        SELECT app, tbl, 'delete', o.uid, o.org_uid, to_jsonb(o)
        FROM old_rows o LEFT JOIN new_rows n ON n.uid = o.uid AND n.org_uid = o.org_uid
        WHERE (NOT soft OR to_jsonb(o) ->> 'deleted_at' IS NULL)
          AND (n.uid IS NULL OR (soft AND to_jsonb(n) ->> 'deleted_at' IS NOT NULL));
        INSERT INTO authoric.changes (app_uid, table_name, op, row_uid, org_uid)
        SELECT app, tbl,
               CASE WHEN o.uid IS NULL OR (soft AND to_jsonb(o) ->> 'deleted_at' IS NOT NULL)
                    THEN 'insert' ELSE 'update' END,
               n.uid, n.org_uid
        FROM new_rows n LEFT JOIN old_rows o ON o.uid = n.uid AND o.org_uid = n.org_uid
        WHERE NOT soft OR to_jsonb(n) ->> 'deleted_at' IS NULL;
    END IF;
    -- No NOTIFY here: one at commit serialises every notifying commit behind a database-wide
    -- lock (bench.capture_cost: a third of the writes/s). The sequencer polls for these rows
    -- every 20 ms while any table is captured (changes/sequencer.py).
    RETURN NULL;
END
$fn$
"""

# A captured table's `uid` default, so a SQL writer may omit it: a UUIDv7 like the
# platform's (48 bits of Unix milliseconds, version 7, variant 10, random bits).
UUID_V7 = r"""
CREATE OR REPLACE FUNCTION authoric.uuid_v7() RETURNS uuid LANGUAGE sql VOLATILE AS $fn$
SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) PLACING
    substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
    FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid
$fn$
"""

BACKFILL = r"""
UPDATE authoric.app_tables SET definition = definition || jsonb_build_object(
    'captureSqlWrites', false,
    'sqlName', format('"%s"."%s"', 'app_' || replace(app_uid::text, '-', ''), name))
"""


def upgrade() -> None:
    op.execute(CAPTURE)
    op.execute(UUID_V7)
    op.execute(BACKFILL)


def downgrade() -> None:
    op.execute("DROP FUNCTION IF EXISTS authoric.capture_sql_writes() CASCADE")
    op.execute("DROP FUNCTION IF EXISTS authoric.uuid_v7() CASCADE")
    op.execute("UPDATE authoric.app_tables SET definition = definition - 'captureSqlWrites' "
               "- 'sqlName'")
