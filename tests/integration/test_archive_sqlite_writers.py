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
