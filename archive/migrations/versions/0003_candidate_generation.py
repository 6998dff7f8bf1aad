"""candidates.generation: the optimize generation that proposed a kernel (NULL for imported and bench kernels, and
for every kernel stored before this revision)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-27
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("candidates") as batch:
        batch.add_column(sa.Column("generation", sa.Integer, nullable=True,
                                   comment="the optimize generation that proposed it; NULL elsewhere"))


def downgrade() -> None:
    with op.batch_alter_table("candidates") as batch:
        batch.drop_column("generation")
