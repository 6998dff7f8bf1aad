"""initial schema: problems, runs, candidates, tags, lineage, evaluations + search indexes

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

DIM = 384
TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "problems",
        sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(64), nullable=False, unique=True),
        sa.Column("name", sa.String(256), nullable=False),
        sa.Column("op_name", sa.String(256), nullable=False, index=True),
        sa.Column("level", sa.Integer, index=True),
        sa.Column("task_id", sa.Integer),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("meta", sa.JSON, nullable=False),
    )
    op.create_table(
        "candidates",
        sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(64), nullable=False, unique=True),
        sa.Column("problem_pk", sa.Integer, sa.ForeignKey("problems.pk", ondelete="CASCADE"), nullable=False,
                  index=True),
        sa.Column("kernel_name", sa.String(256), nullable=False),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("origin", sa.String(32), nullable=False),
        sa.Column("proposer", sa.String(256), nullable=False),
        sa.Column("prompt_tokens", sa.Integer, nullable=False),
        sa.Column("completion_tokens", sa.Integer, nullable=False),
        sa.Column("cost_usd", sa.Float, nullable=False),
        sa.Column("techniques", sa.Text, nullable=False),
        sa.Column("best_outcome", sa.String(32), nullable=False, index=True),
        sa.Column("best_speedup", sa.Float, index=True),
        sa.Column("best_speedup_compile", sa.Float),
        sa.Column("best_runtime_ms", sa.Float),
        sa.Column("ref_runtime_ms", sa.Float),
        sa.Column("compile_ref_runtime_ms", sa.Float),
        sa.Column("device", sa.String(256), nullable=False, index=True),
        sa.Column("created_at", TZ, nullable=False),
    )
    op.create_index("ix_candidates_problem_speedup", "candidates", ["problem_pk", "best_speedup"])
    op.create_table(
        "kernel_tags",
        sa.Column("candidate_pk", sa.Integer, sa.ForeignKey("candidates.pk", ondelete="CASCADE"), primary_key=True),
        sa.Column("tag", sa.String(64), primary_key=True, index=True),
    )
    op.create_table(
        "lineage",
        sa.Column("parent_id", sa.String(64), primary_key=True),
        sa.Column("child_id", sa.String(64), primary_key=True, index=True),
    )
    op.create_table(
        "evaluations",
        sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("candidate_pk", sa.Integer, sa.ForeignKey("candidates.pk", ondelete="CASCADE"), nullable=False,
                  index=True),
        sa.Column("run_id", sa.String(128), sa.ForeignKey("runs.id", ondelete="SET NULL"), index=True),
        sa.Column("outcome", sa.String(32), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("device", sa.String(256), nullable=False),
        sa.Column("runtime_ms", sa.Float),
        sa.Column("ref_runtime_ms", sa.Float),
        sa.Column("compile_ref_runtime_ms", sa.Float),
        sa.Column("speedup", sa.Float),
        sa.Column("speedup_compile", sa.Float),
        sa.Column("max_diff", sa.Float),
        sa.Column("correct", sa.Boolean, nullable=False),
        sa.Column("record", sa.JSON, nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.UniqueConstraint("candidate_pk", "digest", name="uq_evaluations_candidate_digest"),
    )
    if op.get_bind().dialect.name == "sqlite":
        # rowid = candidates.pk / problems.pk; kept in step by kevolve.archive.index.
        op.execute("CREATE VIRTUAL TABLE kernel_fts USING fts5(doc, tokenize='porter unicode61')")
        op.execute(f"CREATE VIRTUAL TABLE kernel_vec USING vec0(embedding float[{DIM}] distance_metric=cosine)")
        op.execute(f"CREATE VIRTUAL TABLE problem_vec USING vec0(embedding float[{DIM}] distance_metric=cosine)")
    else:
        op.create_table(
            "kernel_search",
            sa.Column("candidate_pk", sa.Integer, sa.ForeignKey("candidates.pk", ondelete="CASCADE"),
                      primary_key=True),
            sa.Column("tsv", postgresql.TSVECTOR, nullable=False),
            sa.Column("embedding", postgresql.ARRAY(sa.REAL), nullable=False),
        )
        op.create_index("ix_kernel_search_tsv", "kernel_search", ["tsv"], postgresql_using="gin")
        op.create_table(
            "problem_search",
            sa.Column("problem_pk", sa.Integer, sa.ForeignKey("problems.pk", ondelete="CASCADE"), primary_key=True),
            sa.Column("embedding", postgresql.ARRAY(sa.REAL), nullable=False),
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for t in ("kernel_fts", "kernel_vec", "problem_vec"):
            op.execute(f"DROP TABLE IF EXISTS {t}")
    else:
        op.drop_table("problem_search")
        op.drop_table("kernel_search")
    for t in ("evaluations", "lineage", "kernel_tags", "candidates", "runs", "problems"):
        op.drop_table(t)
