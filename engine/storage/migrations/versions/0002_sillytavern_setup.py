"""SillyTavern folder import: per-chat setup, lorebook link scopes, card images, import identities.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01 06:45:00

- ``chats.setup`` (JSON, nullable): the chat's SillyTavern setup
  (:class:`engine.schema.sillytavern.SillyTavernSetup`); ``NULL`` for chats not imported from a
  SillyTavern folder.
- ``chat_lorebooks.scope`` (``chat`` / ``character`` / ``global``; existing links become ``chat``).
- ``characters.avatar`` (binary, nullable): the card PNG as imported (image and chunks), for a
  lossless export.
- ``import_sources``: identity of imported objects (``kind``, ``key`` = the file's path relative
  to the SillyTavern user folder) → ``object_id`` and the ``digest`` of what it became, so that a
  re-import updates in place and reports added / changed / unchanged.
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0002'
down_revision: str | Sequence[str] | None = '0001'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Upgrade schema."""
    with op.batch_alter_table('chats', schema=None) as batch_op:
        batch_op.add_column(sa.Column('setup', sa.JSON(), nullable=True))
    with op.batch_alter_table('chat_lorebooks', schema=None) as batch_op:
        batch_op.add_column(sa.Column('scope', sa.String(length=16), nullable=False, server_default='chat'))
    with op.batch_alter_table('characters', schema=None) as batch_op:
        batch_op.add_column(sa.Column('avatar', sa.LargeBinary(), nullable=True))
    op.create_table('import_sources',
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('key', sa.Text(), nullable=False),
    sa.Column('object_id', sa.String(length=32), nullable=False),
    sa.Column('digest', sa.String(length=64), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('kind', 'key', name=op.f('pk_import_sources'))
    )


def downgrade() -> None:
    """Downgrade schema."""
    op.drop_table('import_sources')
    with op.batch_alter_table('characters', schema=None) as batch_op:
        batch_op.drop_column('avatar')
    with op.batch_alter_table('chat_lorebooks', schema=None) as batch_op:
        batch_op.drop_column('scope')
    with op.batch_alter_table('chats', schema=None) as batch_op:
        batch_op.drop_column('setup')
