"""``kevolve archive export`` / ``import``: files (JSONL, Parquet) and run folders in and out."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from kevolve.archive.ingest import bench_candidate, bench_entry, never_archived, run_entry
from kevolve.archive.records import KernelFilter
from kevolve.archive.sakana import FileFormatError, read_rows, to_entry, to_row, write_rows
from kevolve.archive.store import Archive, Entry
from kevolve.records import Evaluation, Problem
from kevolve.runfiles import RunFileError, RunFiles

log = logging.getLogger(__name__)
BATCH = 256
EXPORT_SUFFIXES = {".jsonl": "jsonl", ".parquet": "parquet"}


@dataclass
class ImportReport:
    """What an import did (filled in as it goes)."""

    rows: int = 0
    kernels_added: int = 0
    skipped: int = 0
    first_error: str = ""


def export(archive: Archive, path: Path, fmt: str | None = None, filters: KernelFilter | None = None) -> int:
    """Write matching kernels (default: every outcome) to ``path``; the format follows the suffix (.jsonl or
    .parquet) unless `fmt` names it. FileFormatError for another suffix: a `.csv` must not silently hold JSON."""
    fmt = fmt or EXPORT_SUFFIXES.get(path.suffix.lower())
    if fmt is None:
        raise FileFormatError(f"{path.name}: cannot export to {path.suffix or 'a file without a suffix'}: "
                              f"name it .jsonl or .parquet (or give --format jsonl|parquet)")
    rows = (to_row(k, src, ev, parents) for k, src, ev, parents in archive.iter_entries(filters or KernelFilter(outcome=None)))
    return write_rows(rows, path, fmt)


def _flush(archive: Archive, batch: list[Entry], report: ImportReport) -> None:
    if batch:
        report.kernels_added += archive.put_many(batch, run_kind="import")
        batch.clear()


def import_file(archive: Archive, path: Path, run_id: str | None = None) -> ImportReport:
    """Import a JSONL / Parquet export (ours or Sakana's); unusable rows are counted and skipped."""
    report = ImportReport()
    batch: list[Entry] = []
    for n, row in enumerate(read_rows(path), 1):
        report.rows += 1
        try:
            batch.append(to_entry(row, run_id))
        except (ValueError, TypeError, OverflowError) as e:
            report.skipped += 1
            if not report.first_error:
                report.first_error = f"row {n}: {str(e).splitlines()[0][:200]}"
            continue
        if len(batch) >= BATCH:
            _flush(archive, batch, report)
    _flush(archive, batch, report)
    return report


def import_run_folder(archive: Archive, folder: Path) -> ImportReport:
    """Import an optimize run folder (either format, kevolve/runfiles.py): each evaluated candidate's own
    record, as live ingest stores it (`run_entry`); infra_error verdicts stay out, as they do live."""
    if not (folder / "problem.json").is_file():
        raise FileFormatError(f"{folder}: not a run folder (no problem.json, nor run.json + results.jsonl)")
    try:
        problem = Problem.model_validate_json((folder / "problem.json").read_text())
    except ValueError:
        raise FileFormatError(f"{folder}/problem.json: not a Problem record") from None
    report, batch = ImportReport(), []
    for name, saved in RunFiles(folder, problem.id).saved():
        if isinstance(saved, RunFileError):
            report.rows += 1
            report.skipped += 1
            report.first_error = report.first_error or str(saved)
            continue
        if saved.evaluation is None:
            continue  # proposed but never evaluated (a duplicate, or killed before its verdict)
        report.rows += 1
        if never_archived(saved.evaluation):
            report.skipped += 1
            continue
        try:
            batch.append(run_entry(problem, saved.candidate, saved.evaluation, folder.name))
        except ValueError as e:
            report.skipped += 1
            report.first_error = report.first_error or f"{name}: {str(e).splitlines()[0][:200]}"
    _flush(archive, batch, report)
    return report


def _bench_sources(folder: Path, meta: dict, row: dict) -> tuple[Path, Path]:
    """Where a bench row's problem and solution files are (the suite and solution set it recorded)."""
    suite = Path(str(meta.get("suite") or ""))
    level, file = int(row["level"]), str(row["file"])
    problem = next((p for p in (suite / f"level{level}" / file, suite / "KernelBench" / f"level{level}" / file)
                    if p.is_file()), suite / f"level{level}" / file)
    sol = Path(str(row.get("solution") or ""))
    if not sol.is_absolute() and not sol.is_file():
        sol = Path(str(meta.get("solutions") or folder)) / sol
    return problem, sol


def import_bench_folder(archive: Archive, folder: Path) -> ImportReport:
    """Import a bench run folder (run.json + results.jsonl rows carrying evaluations)."""
    try:
        meta = json.loads((folder / "run.json").read_text())
    except (OSError, ValueError):
        raise FileFormatError(f"{folder}/run.json: not readable JSON") from None
    report, batch = ImportReport(), []
    for n, line in enumerate((folder / "results.jsonl").read_text(errors="replace").splitlines(), 1):
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a torn last line
        if not isinstance(row, dict) or not row.get("evaluation"):
            continue  # a problem-level row (no candidate)
        report.rows += 1
        try:
            prob_path, sol_path = _bench_sources(folder, meta, row)
            problem = Problem.from_source(prob_path.read_text(), str(prob_path), prob_path.stem, level=int(row["level"]))
            cand = bench_candidate(sol_path.read_text(), problem.id)
            ev = Evaluation.model_validate(row["evaluation"])
            if (ev.candidate_id, ev.problem_id) != (cand.id, problem.id):
                raise ValueError(f"{sol_path.name} or its problem changed since the bench evaluated it")
            if never_archived(ev):
                report.skipped += 1
                continue
            batch.append(bench_entry(problem, cand, ev, folder.name, str(row.get("solution") or sol_path)))
        except (OSError, ValueError, KeyError, TypeError) as e:
            report.skipped += 1
            report.first_error = report.first_error or f"line {n}: {str(e).splitlines()[0][:200]}"
        if len(batch) >= BATCH:
            _flush(archive, batch, report)
    _flush(archive, batch, report)
    return report


def import_path(archive: Archive, path: Path, run_id: str | None = None) -> ImportReport:
    """An optimize run folder, a bench run folder, or an export file."""
    if path.is_dir() and (path / "run.json").is_file() and (path / "results.jsonl").is_file():
        return import_bench_folder(archive, path)
    if path.is_dir():
        return import_run_folder(archive, path)
    if not path.is_file():
        raise FileFormatError(f"{path}: no such file or folder")
    return import_file(archive, path, run_id)
