"""platform tables

Revision ID: 0001
Revises: 
Create Date: 2026-12-02
"""
from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Positions are stamped from this sequence by the sequencer, in commit order.
    op.execute("CREATE SEQUENCE IF NOT EXISTS authoric.change_pos")
    op.create_table('apps',
    sa.Column('uid', sa.UUID(), nullable=False),
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('settings', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.Column('version', sa.BigInteger(), server_default=sa.text('1'), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('uid'),
    sa.UniqueConstraint('name'),
    schema='authoric'
    )
    op.create_table('changes',
    sa.Column('id', sa.BigInteger(), autoincrement=True, nullable=False),
    sa.Column('pos', sa.BigInteger(), nullable=True),
    sa.Column('app_uid', sa.UUID(), nullable=False),
    sa.Column('table_name', sa.Text(), nullable=False),
    sa.Column('op', sa.Text(), nullable=False),
    sa.Column('row_uid', sa.UUID(), nullable=True),
    sa.Column('org_uid', sa.UUID(), nullable=False),
    sa.Column('actor_uid', sa.UUID(), nullable=True),
    sa.Column('old_row', postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('pos'),
    schema='authoric'
    )
    op.create_index('changes_app_pos', 'changes', ['app_uid', 'pos'], unique=False, schema='authoric')
    op.create_index('changes_unstamped', 'changes', ['id'], unique=False, schema='authoric', postgresql_where=sa.text('pos IS NULL'))
    op.create_table('app_tables',
    sa.Column('app_uid', sa.UUID(), nullable=False),
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('definition', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['app_uid'], ['authoric.apps.uid'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('app_uid', 'name'),
    schema='authoric'
    )
    op.create_table('orgs',
    sa.Column('uid', sa.UUID(), nullable=False),
    sa.Column('app_uid', sa.UUID(), nullable=False),
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['app_uid'], ['authoric.apps.uid'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('uid'),
    sa.UniqueConstraint('app_uid', 'name'),
    schema='authoric'
    )
    op.create_table('refresh_tokens',
    sa.Column('jti', sa.UUID(), nullable=False),
    sa.Column('family', sa.UUID(), nullable=False),
    sa.Column('app_uid', sa.UUID(), nullable=False),
    sa.Column('user_uid', sa.UUID(), nullable=False),
    sa.Column('org_uid', sa.UUID(), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('spent_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['app_uid'], ['authoric.apps.uid'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('jti'),
    schema='authoric'
    )
    op.create_index(op.f('ix_authoric_refresh_tokens_family'), 'refresh_tokens', ['family'], unique=False, schema='authoric')
    op.create_table('roles',
    sa.Column('app_uid', sa.UUID(), nullable=False),
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('permissions', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('row_policies', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('redact', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.ForeignKeyConstraint(['app_uid'], ['authoric.apps.uid'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('app_uid', 'name'),
    schema='authoric'
    )
    op.create_table('users',
    sa.Column('uid', sa.UUID(), nullable=False),
    sa.Column('app_uid', sa.UUID(), nullable=False),
    sa.Column('email', sa.Text(), nullable=False),
    sa.Column('password_hash', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['app_uid'], ['authoric.apps.uid'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('uid'),
    sa.UniqueConstraint('app_uid', 'email'),
    schema='authoric'
    )
    op.create_table('members',
    sa.Column('app_uid', sa.UUID(), nullable=False),
    sa.Column('org_uid', sa.UUID(), nullable=False),
    sa.Column('user_uid', sa.UUID(), nullable=False),
    sa.Column('roles', postgresql.ARRAY(sa.Text()), nullable=False),
    sa.ForeignKeyConstraint(['app_uid'], ['authoric.apps.uid'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['org_uid'], ['authoric.orgs.uid'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['user_uid'], ['authoric.users.uid'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('org_uid', 'user_uid'),
    schema='authoric'
    )


def downgrade() -> None:
    # User tables live in one schema per app; they go with the apps that own them.
    op.execute(
        "DO $$ DECLARE s text; BEGIN "
        "FOR s IN SELECT nspname FROM pg_namespace WHERE nspname LIKE 'app\\_%' LOOP "
        "EXECUTE format('DROP SCHEMA %I CASCADE', s); END LOOP; END $$"
    )
    op.execute("DROP SEQUENCE IF EXISTS authoric.change_pos")
    op.drop_table('members', schema='authoric')
    op.drop_table('users', schema='authoric')
    op.drop_table('roles', schema='authoric')
    op.drop_index(op.f('ix_authoric_refresh_tokens_family'), table_name='refresh_tokens', schema='authoric')
    op.drop_table('refresh_tokens', schema='authoric')
    op.drop_table('orgs', schema='authoric')
    op.drop_table('app_tables', schema='authoric')
    op.drop_index('changes_unstamped', table_name='changes', schema='authoric', postgresql_where=sa.text('pos IS NULL'))
    op.drop_index('changes_app_pos', table_name='changes', schema='authoric')
    op.drop_table('changes', schema='authoric')
    op.drop_table('apps', schema='authoric')
