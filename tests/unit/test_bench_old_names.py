"""A bench folder written before eager time had one name (tests/fixtures/bench_v_ref_ms, written by RunStore at
2188dff: `ref_ms`, `compile_ref_ms`) reads with the names of today (`eager_ms`, `compile_ms`), which are the ones
written from now on."""

from __future__ import annotations

import shutil
from pathlib import Path

from kevolve.kernelbench.store import RunStore

OLD = Path(__file__).parent.parent / "fixtures" / "bench_v_ref_ms"


def test_an_old_bench_folder_reads_with_todays_names_and_is_written_back_with_them(tmp_path: Path) -> None:
    assert '"ref_ms":2.0' in (OLD / "results.jsonl").read_text()  # the old writer's name
    (row,) = RunStore(OLD).rows()
    assert (row.eager_ms, row.compile_ms, row.speedup) == (2.0, 1.0, 4.0)
    again = tmp_path / "again"
    shutil.copytree(OLD, again)
    RunStore(again).write(row)
    last = (again / "results.jsonl").read_text().splitlines()[-1]
    assert '"eager_ms":2.0' in last and '"compile_ms":1.0' in last and "ref_ms" not in last
