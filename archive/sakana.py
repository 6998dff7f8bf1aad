"""Export and import in the column layout of Sakana AI's public CUDA-engineer archive.

A row has Sakana's columns (``Op_Name``, ``Level_ID``, ``Task_ID``, ``Kernel_Name``, ``CUDA_Runtime``,
``PyTorch_Native_Runtime``, ``PyTorch_Compile_Runtime``, ``CUDA_Speedup_Native``,
``CUDA_Speedup_Compile``, ``CUDA_Code``, ``PyTorch_Code_Module``, ``PyTorch_Code_Functional``,
``Correct``, ``Max_Diff``, ``Error``, ``NCU_Profile``, ``Torch_Profile``, ``Clang_Tidy``), so their
dataset imports here and our exports load in the tools written for theirs; runtimes are in ms.
Our own extra columns start with ``kevolve_`` (ids, outcome, device, techniques, parents, and the
full Evaluation as JSON, which makes an export → import round trip lossless).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Iterator
from pathlib import Path

from kevolve.archive.records import ArchivedKernel
from kevolve.archive.store import Entry, check_storable
from kevolve.records import (Candidate, CheckResult, Evaluation, Origin, Outcome, Problem, Profile, TimingStats,
                             content_hash)

log = logging.getLogger(__name__)

SAKANA_COLUMNS = ("Op_Name", "Level_ID", "Task_ID", "Kernel_Name", "CUDA_Runtime", "PyTorch_Native_Runtime",
                  "PyTorch_Compile_Runtime", "CUDA_Speedup_Native", "CUDA_Speedup_Compile", "CUDA_Code",
                  "PyTorch_Code_Module", "PyTorch_Code_Functional", "Correct", "Max_Diff", "Error", "NCU_Profile",
                  "Torch_Profile", "Clang_Tidy")
KEVOLVE_COLUMNS = ("kevolve_kernel_id", "kevolve_problem_id", "kevolve_problem_name", "kevolve_outcome",
                   "kevolve_reason", "kevolve_device", "kevolve_techniques", "kevolve_parent_ids",
                   "kevolve_origin", "kevolve_proposer", "kevolve_evaluation", "kevolve_generation")
REQUIRED = ("CUDA_Code", "PyTorch_Code_Module")


class FileFormatError(ValueError):
    """The file is not a readable JSONL / Parquet export (one-line message)."""


def to_row(kernel: ArchivedKernel, problem_source: str, ev: Evaluation | None, parents: Iterable[str] = ()) -> dict:
    """One export row for a kernel (its source included) and its best evaluation."""
    ncu = ev.profile.ncu if ev and ev.profile and ev.profile.ncu else None
    from kevolve.archive.records import max_diff

    failed = kernel.outcome not in (Outcome.OK.value, Outcome.REJECTED.value)
    return {
        "Op_Name": kernel.op_name, "Level_ID": kernel.level, "Task_ID": kernel.task_id,
        "Kernel_Name": kernel.kernel_name, "CUDA_Runtime": kernel.runtime_ms,
        "PyTorch_Native_Runtime": kernel.ref_runtime_ms, "PyTorch_Compile_Runtime": kernel.compile_ref_runtime_ms,
        "CUDA_Speedup_Native": kernel.speedup, "CUDA_Speedup_Compile": kernel.speedup_compile,
        "CUDA_Code": kernel.source, "PyTorch_Code_Module": problem_source, "PyTorch_Code_Functional": None,
        "Correct": kernel.outcome == Outcome.OK.value, "Max_Diff": max_diff(ev) if ev else None,
        "Error": (ev.reason if ev else kernel.outcome) if failed else None,
        "NCU_Profile": json.dumps(ncu) if ncu else None, "Torch_Profile": None, "Clang_Tidy": None,
        "kevolve_kernel_id": kernel.id, "kevolve_problem_id": kernel.problem_id,
        "kevolve_problem_name": kernel.problem_name, "kevolve_outcome": kernel.outcome,
        "kevolve_reason": ev.reason if ev else "", "kevolve_device": kernel.device,
        "kevolve_techniques": ",".join(kernel.techniques), "kevolve_parent_ids": ",".join(parents),
        "kevolve_origin": kernel.origin, "kevolve_proposer": kernel.proposer,
        "kevolve_evaluation": ev.model_dump_json() if ev else None, "kevolve_generation": kernel.generation,
    }


def _pyarrow():  # noqa: ANN202 - (pyarrow, pyarrow.parquet)
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ModuleNotFoundError:
        raise FileFormatError("Parquet files need pyarrow, which is not installed: pip install 'kevolve[archive]' "
                              "(or use .jsonl)") from None
    return pa, pq


def write_rows(rows: Iterable[dict], path: Path, fmt: str) -> int:
    """Write rows as JSONL or Parquet (atomically: a temp file renamed into place); returns the count."""
    tmp = path.with_name(f".{path.name}.tmp")
    n = 0
    if fmt == "jsonl":
        with tmp.open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
                n += 1
    elif fmt == "parquet":
        pa, pq = _pyarrow()

        schema = pa.schema([(c, pa.string()) for c in ("Op_Name", "Kernel_Name", "CUDA_Code", "PyTorch_Code_Module",
                                                       "PyTorch_Code_Functional", "Error", "NCU_Profile",
                                                       "Torch_Profile", "Clang_Tidy",
                                                       *(c for c in KEVOLVE_COLUMNS if c != "kevolve_generation"))]
                           + [(c, pa.int64()) for c in ("Level_ID", "Task_ID", "kevolve_generation")]
                           + [(c, pa.float64()) for c in ("CUDA_Runtime", "PyTorch_Native_Runtime",
                                                          "PyTorch_Compile_Runtime", "CUDA_Speedup_Native",
                                                          "CUDA_Speedup_Compile", "Max_Diff")]
                           + [("Correct", pa.bool_())])
        schema = pa.schema([schema.field(c) for c in (*SAKANA_COLUMNS, *KEVOLVE_COLUMNS)])
        with pq.ParquetWriter(tmp, schema) as w:
            batch: list[dict] = []
            for row in rows:
                batch.append(row)
                n += 1
                if len(batch) >= 1000:
                    w.write_table(pa.Table.from_pylist(batch, schema=schema))
                    batch = []
            if batch or n == 0:
                w.write_table(pa.Table.from_pylist(batch, schema=schema))
    else:
        raise FileFormatError(f"unknown format {fmt!r}: use jsonl or parquet")
    tmp.replace(path)
    return n


def read_rows(path: Path) -> Iterator[dict]:
    """Rows of a JSONL or Parquet file (by content: Parquet starts with 'PAR1')."""
    try:
        with path.open("rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise FileFormatError(f"{path}: cannot read: {e.strerror}") from None
    if magic == b"PAR1":
        _pa, pq = _pyarrow()

        try:
            pf = pq.ParquetFile(path)
        except Exception as e:  # noqa: BLE001 - pyarrow raises several types for a damaged file
            raise FileFormatError(f"{path}: not a readable Parquet file: {e}") from None
        for batch in pf.iter_batches(batch_size=1000):
            yield from batch.to_pylist()
        return
    with path.open("r", encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                raise FileFormatError(f"{path}:{n}: not JSON (expected one JSON object per line)") from None
            if not isinstance(row, dict):
                raise FileFormatError(f"{path}:{n}: expected a JSON object, got {type(row).__name__}")
            yield row


def _num(v: object) -> float | None:
    try:
        x = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) and x > 0 else None


def _generation(v: object) -> int | None:
    """A row's generation: a whole number from 0, else none (a hand-edited or foreign file)."""
    g = _int(v)
    return g if g is not None and g >= 0 else None


def _int(v: object) -> int | None:
    """An integer column (Sakana stores some as floats); None when missing or not finite."""
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return None
    return int(v)


def _timing(ms: float | None) -> TimingStats | None:
    if ms is None:
        return None
    return TimingStats(median_ms=ms, mean_ms=ms, min_ms=ms, max_ms=ms, iqr_ms=0.0, trials=0, method="imported")


def _outcome(row: dict) -> Outcome:
    if str(row.get("kevolve_outcome") or "") in {o.value for o in Outcome}:
        return Outcome(row["kevolve_outcome"])
    if row.get("Correct") in (True, 1, "True", "true") and _num(row.get("CUDA_Runtime")):
        return Outcome.OK
    err = str(row.get("Error") or "").lower()
    if "compil" in err or "build" in err:
        return Outcome.COMPILE_ERROR
    return Outcome.RUNTIME_ERROR if err and err not in ("none", "nan") else Outcome.INCORRECT


def _ncu(text: object) -> dict[str, float]:
    try:
        data = json.loads(str(text))
    except (TypeError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): float(v) for k, v in data.items() if isinstance(v, int | float) and math.isfinite(float(v))}


def to_entry(row: dict, run_id: str | None = None) -> Entry:
    """An archive entry from an export row (ours or Sakana's); raises ValueError for an unusable row."""
    missing = [c for c in REQUIRED if not isinstance(row.get(c), str) or not row[c].strip()]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    op = str(row.get("Op_Name") or "unknown")
    task, level = _int(row.get("Task_ID")), _int(row.get("Level_ID"))
    name = str(row.get("kevolve_problem_name") or (f"{task}_{op}" if task is not None else op))[:256]
    problem = Problem(id=content_hash(row["PyTorch_Code_Module"]), name=name, level=level,
                      source=row["PyTorch_Code_Module"], path=f"imported/{name}.py")
    parents = tuple(p for p in str(row.get("kevolve_parent_ids") or "").split(",") if p)
    origin = str(row.get("kevolve_origin") or "")
    cand = Candidate(id=content_hash(row["CUDA_Code"]), problem_id=problem.id, source=row["CUDA_Code"],
                     parent_ids=parents, origin=Origin(origin) if origin in {o.value for o in Origin} else Origin.IMPORTED,
                     proposer=str(row.get("kevolve_proposer") or ("kevolve" if row.get("kevolve_kernel_id") else "sakana")),
                     generation=_generation(row.get("kevolve_generation")))
    ids = {"candidate_id": cand.id, "problem_id": problem.id}
    if row.get("kevolve_evaluation"):
        ev = Evaluation.model_validate_json(row["kevolve_evaluation"]).model_copy(update=ids)
    else:
        outcome, diff = _outcome(row), _num(row.get("Max_Diff"))
        ncu = _ncu(row.get("NCU_Profile"))
        ev = Evaluation(**ids, outcome=outcome,
                        reason="imported" if outcome is Outcome.OK else f"imported: {str(row.get('Error') or outcome.value)[:300]}",
                        checks=(CheckResult(name="correct:imported", passed=outcome is Outcome.OK,
                                            detail=f"err {diff:.3e} (imported)" if diff is not None else "imported"),),
                        timing=_timing(_num(row.get("CUDA_Runtime"))),
                        ref_timing=_timing(_num(row.get("PyTorch_Native_Runtime"))),
                        compile_ref_timing=_timing(_num(row.get("PyTorch_Compile_Runtime"))),
                        profile=Profile(ncu=ncu) if ncu else None, device=str(row.get("kevolve_device") or "")[:256])
    entry = Entry(problem=problem, candidate=cand, evaluation=ev, kernel_name=str(row.get("Kernel_Name") or "")[:256],
                  run_id=run_id)
    check_storable(entry)
    return entry
