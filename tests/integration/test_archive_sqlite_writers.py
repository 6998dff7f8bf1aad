"""Several processes writing to one SQLite archive at once: every row lands, nothing is locked out."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kevolve.archive.embed import HashingEmbedder
from kevolve.archive.store import Archive
from kevolve.archive.synthetic import entries

WRITER = """
import sys
from kevolve.archive.embed import HashingEmbedder
from kevolve.archive.store import Archive
from kevolve.archive.synthetic import entries
url, seed = sys.argv[1], int(sys.argv[2])
a = Archive(url, embedder=HashingEmbedder())
for e in entries(30, n_problems=3, seed=seed):
    a.put(e.problem, e.candidate, e.evaluation, run_id=e.run_id)
print("done", seed)
"""


def test_four_concurrent_writer_processes_lose_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, url, str(seed)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for seed in range(4)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    a = Archive(url, embedder=HashingEmbedder())
    s = a.stats()
    made = [e for seed in range(4) for e in entries(30, n_problems=3, seed=seed)]
    # the same source from two writers is one kernel with two evaluations
    assert s.kernels == len({e.candidate.id for e in made}) and s.evaluations == 120 and s.runs == 4
    assert s.problems == len({e.problem.id for e in made}) == 3
    assert len(a.search("shared memory", k=200)) > 0


KILLED = """
import sys
from kevolve.archive.embed import HashingEmbedder
from kevolve.archive.store import Archive
from kevolve.archive.synthetic import entries
a = Archive(sys.argv[1], embedder=HashingEmbedder())
made = list(entries(4000, n_problems=40, seed=9))
print("ready", flush=True)
for i in range(0, len(made), 20):
    a.put_many(made[i:i + 20])
"""


def test_kill_9_mid_ingest_leaves_no_partial_entries(tmp_path: Path) -> None:
    import signal
    import time

    from sqlalchemy import text

    url = f"sqlite:///{tmp_path / 'crash.db'}"
    p = subprocess.Popen([sys.executable, "-c", KILLED, url], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    a = Archive(url, embedder=HashingEmbedder())
    deadline = time.monotonic() + 120
    while a.stats().kernels < 60 and time.monotonic() < deadline:  # let it get well into the writes
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    with a.engine.connect() as c:
        assert c.execute(text("PRAGMA integrity_check")).scalar() == "ok"
        n = c.execute(text("SELECT count(*) FROM candidates")).scalar()
        assert n > 0 and n % 20 == 0  # whole batches only
        for table in ("kernel_vec", "kernel_fts"):
            assert c.execute(text(f"SELECT count(*) FROM {table}")).scalar() == n
        assert c.execute(text("SELECT count(*) FROM candidates c WHERE NOT EXISTS "
                              "(SELECT 1 FROM evaluations e WHERE e.candidate_pk = c.pk)")).scalar() == 0
    a.put_many(list(entries(3, n_problems=1, seed=10)))  # and the archive is writable afterwards
