"""archive_state: a generation number bumped by every write, for in-memory search caches

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "archive_state",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("generation", sa.Integer, nullable=False),
    )
    op.execute("INSERT INTO archive_state (id, generation) VALUES (1, 0)")


def downgrade() -> None:
    op.drop_table("archive_state")
