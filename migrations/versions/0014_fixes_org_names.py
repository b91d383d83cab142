"""Org names are labels, not keys: two orgs of an app may share a name

A user creating an org (`orgCreation: "users"`) got 409 for any name another tenant already
used, which told them that tenant existed and let anyone squat names. The unique constraint
on (app_uid, name) becomes a plain index (the SDK and CLI still find an org by its name, and
say so when several share it); the operator's own `POST /admin/apps/{app}/orgs` keeps its 409
for a name in use, checked by the service.

Downgrading restores the constraint, which fails while two orgs of one app share a name.

Revision ID: 0014_fixes
Revises: 0010_sec
Create Date: 2026-12-07
"""
from alembic import op

revision = "0014_fixes"
down_revision = "0010_sec"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_constraint("orgs_app_uid_name_key", "orgs", schema="authoric", type_="unique")
    op.create_index("orgs_app_name", "orgs", ["app_uid", "name"], schema="authoric")


def downgrade() -> None:
    op.drop_index("orgs_app_name", "orgs", schema="authoric")
    op.create_unique_constraint("orgs_app_uid_name_key", "orgs", ["app_uid", "name"],
                                schema="authoric")
