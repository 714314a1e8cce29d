"""initial library schema.

Revision ID: 0001
Revises:
Create Date: 2026-11-29 22:27:51.333412

"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0001'
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Upgrade schema: the tables in dependency order (the DDL Alembic generated, one helper per group)."""
    _create_owner_tables()
    _create_chats()
    _create_lorebooks()
    _create_chat_links()
    _create_lorebook_entries()
    _create_messages()


def _create_owner_tables() -> None:
    """Characters, personas and the library's key/value metadata (no foreign keys)."""
    op.create_table('characters',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('data', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_characters'))
    )
    op.create_table('library_meta',
    sa.Column('key', sa.String(length=64), nullable=False),
    sa.Column('value', sa.Text(), nullable=False),
    sa.PrimaryKeyConstraint('key', name=op.f('pk_library_meta'))
    )
    op.create_table('personas',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('data', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_personas'))
    )


def _create_chats() -> None:
    """Chats (branches point at their parent chat) and their indexes."""
    op.create_table('chats',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('title', sa.Text(), nullable=False),
    sa.Column('character_id', sa.String(length=32), nullable=True),
    sa.Column('persona_id', sa.String(length=32), nullable=True),
    sa.Column('parent_id', sa.String(length=32), nullable=True),
    sa.Column('branch_point', sa.Integer(), nullable=True),
    sa.Column('settings', sa.JSON(), nullable=False),
    sa.Column('data', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['character_id'], ['characters.id'], name=op.f('fk_chats_character_id_characters'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['parent_id'], ['chats.id'], name=op.f('fk_chats_parent_id_chats'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['persona_id'], ['personas.id'], name=op.f('fk_chats_persona_id_personas'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_chats'))
    )
    with op.batch_alter_table('chats', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_chats_character_id'), ['character_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_chats_parent_id'), ['parent_id'], unique=False)


def _create_lorebooks() -> None:
    """Lorebooks (a card's embedded book belongs to its character) and their index."""
    op.create_table('lorebooks',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('data', sa.JSON(), nullable=False),
    sa.Column('character_id', sa.String(length=32), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['character_id'], ['characters.id'], name=op.f('fk_lorebooks_character_id_characters'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_lorebooks'))
    )
    with op.batch_alter_table('lorebooks', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_lorebooks_character_id'), ['character_id'], unique=False)


def _create_chat_links() -> None:
    """The audit of each chat's last generation and the chat ↔ lorebook links."""
    op.create_table('audits',
    sa.Column('chat_id', sa.String(length=32), nullable=False),
    sa.Column('generation_id', sa.String(length=32), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('error_code', sa.String(length=64), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('data', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['chat_id'], ['chats.id'], name=op.f('fk_audits_chat_id_chats'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('chat_id', name=op.f('pk_audits'))
    )
    op.create_table('chat_lorebooks',
    sa.Column('chat_id', sa.String(length=32), nullable=False),
    sa.Column('lorebook_id', sa.String(length=32), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['chat_id'], ['chats.id'], name=op.f('fk_chat_lorebooks_chat_id_chats'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['lorebook_id'], ['lorebooks.id'], name=op.f('fk_chat_lorebooks_lorebook_id_lorebooks'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('chat_id', 'lorebook_id', name=op.f('pk_chat_lorebooks'))
    )


def _create_lorebook_entries() -> None:
    """Lorebook entries, one row each, in book order, and their index."""
    op.create_table('lorebook_entries',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('lorebook_id', sa.String(length=32), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('uid', sa.Text(), nullable=False),
    sa.Column('comment', sa.Text(), nullable=False),
    sa.Column('constant', sa.Boolean(), nullable=False),
    sa.Column('disable', sa.Boolean(), nullable=False),
    sa.Column('data', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['lorebook_id'], ['lorebooks.id'], name=op.f('fk_lorebook_entries_lorebook_id_lorebooks'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_lorebook_entries')),
    sa.UniqueConstraint('lorebook_id', 'position', name='uq_lorebook_entries_position')
    )
    with op.batch_alter_table('lorebook_entries', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_lorebook_entries_lorebook_id'), ['lorebook_id'], unique=False)


def _create_messages() -> None:
    """Chat messages, one row each, in chat order, and their index."""
    op.create_table('messages',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('chat_id', sa.String(length=32), nullable=False),
    sa.Column('idx', sa.Integer(), nullable=False),
    sa.Column('role', sa.String(length=16), nullable=False),
    sa.Column('name', sa.Text(), nullable=True),
    sa.Column('content', sa.JSON(), nullable=True),
    sa.Column('tool_calls', sa.JSON(), nullable=True),
    sa.Column('tool_result_id', sa.Text(), nullable=True),
    sa.Column('tool_result_key', sa.String(length=16), nullable=True),
    sa.Column('pinned', sa.Boolean(), nullable=False),
    sa.Column('manual_excluded', sa.Boolean(), nullable=False),
    sa.Column('hidden', sa.Boolean(), nullable=False),
    sa.Column('swipes', sa.JSON(), nullable=True),
    sa.Column('extra', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['chat_id'], ['chats.id'], name=op.f('fk_messages_chat_id_chats'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_messages')),
    sa.UniqueConstraint('chat_id', 'idx', name='uq_messages_chat_idx')
    )
    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_messages_chat_id'), ['chat_id'], unique=False)


def downgrade() -> None:
    """Downgrade schema."""
    # ### commands auto generated by Alembic - please adjust! ###
    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_messages_chat_id'))

    op.drop_table('messages')
    with op.batch_alter_table('lorebook_entries', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_lorebook_entries_lorebook_id'))

    op.drop_table('lorebook_entries')
    op.drop_table('chat_lorebooks')
    op.drop_table('audits')
    with op.batch_alter_table('lorebooks', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_lorebooks_character_id'))

    op.drop_table('lorebooks')
    with op.batch_alter_table('chats', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_chats_parent_id'))
        batch_op.drop_index(batch_op.f('ix_chats_character_id'))

    op.drop_table('chats')
    op.drop_table('personas')
    op.drop_table('library_meta')
    op.drop_table('characters')
    # ### end Alembic commands ###
