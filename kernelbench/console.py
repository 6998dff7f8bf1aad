"""What `kevolve bench` shows in the terminal: progress with ETA, the per-level table, comparisons."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from kevolve.kernelbench.compare import Diff
from kevolve.kernelbench.metrics import summarize
from kevolve.kernelbench.report import LEVEL_HEADERS, level_table_rows
from kevolve.kernelbench.store import ResultRow, RunStore

console = Console()
if not console.is_terminal:  # logs and pipes: wide enough for the tables
    console = Console(width=180)


class Progressor:
    """A rich progress bar over the planned evaluations, with a running outcome tally."""

    def __init__(self, total: int, skipped: int, root: Path) -> None:
        self.total, self.skipped, self.tally, self.evaluated = total, skipped, Counter[str](), 0
        self.progress = Progress(TextColumn("[bold]bench"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                                 TextColumn("{task.fields[status]}"), console=console,
                                 disable=not console.is_terminal)
        self.task = self.progress.add_task("bench", total=total, status="")
        if skipped:
            console.print(f"resuming {root}: {skipped} evaluation(s) already finished, {total} to go")
        else:
            console.print(f"run folder {root}: {total} evaluation(s) to go")

    def __enter__(self) -> Progressor:
        self.progress.start()
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def stop(self) -> None:
        self.progress.stop()

    def done(self, row: ResultRow) -> None:
        """Count a verdict; a line for each one (problem-level verdicts also above a bar)."""
        self.tally[row.status] += 1
        status = " ".join(f"{k} {v}" for k, v in self.tally.most_common(4))
        if row.is_problem_row or not row.label:  # a verdict on the whole problem: always said, with its reason
            line = f"L{row.level}/{row.file}: {row.status}: {row.reason.partition(': ')[2][:240]} ({row.wall_s:.1f}s)"
            self.progress.update(self.task, status=status)
            if console.is_terminal:
                self.progress.console.print(line, markup=False, highlight=False)
            else:
                print(line, flush=True)
            return
        self.progress.update(self.task, advance=1, status=status)
        self.evaluated += 1
        if not console.is_terminal:  # a log line per evaluation when nobody watches a bar
            sp = f" {row.speedup:.2f}x" if row.speedup else ""
            print(f"[{self.evaluated}/{self.total}] L{row.level}/{row.file} {row.label}: "
                  f"{row.status}{sp} ({row.wall_s:.1f}s)", flush=True)


def level_table(store: RunStore) -> Table:
    table = Table(title="kevolve bench: per level")
    for h in LEVEL_HEADERS:
        table.add_column(h)
    for s in summarize(store.rows()):
        table.add_row(*level_table_rows(s))
    return table


def print_summary(store: RunStore, paths: dict[str, Path], elapsed: float | None = None,
                  evaluated: int = 0, interrupted: bool = False) -> None:
    console.print(level_table(store))
    if elapsed is not None and evaluated:
        console.print(f"{evaluated} evaluation(s) in {elapsed:.1f} s ({60 * evaluated / max(elapsed, 1e-9):.1f}/min)")
    if interrupted:
        console.print("interrupted: rerun the same command to continue", style="yellow")
    for name, p in paths.items():
        console.print(f"{name}: {p}")
    sys.stdout.flush()


def print_compare(diffs: list[Diff], a: str, b: str) -> None:
    table = Table(title=f"A = {a}\nB = {b}")
    for h in ("problem", "A", "B", "A speedup", "B speedup", "B/A", "change"):
        table.add_column(h)
    sp = lambda r: "—" if r is None or r.speedup is None else f"{r.speedup:.2f}x"  # noqa: E731
    for d in diffs:
        table.add_row(d.key, d.a.status if d.a else "—", d.b.status if d.b else "—", sp(d.a), sp(d.b),
                      "—" if d.ratio is None else f"{d.ratio:.2f}", d.change)
    console.print(table)
    counts = Counter(d.change for d in diffs)
    console.print(", ".join(f"{k} {v}" for k, v in counts.most_common()))


__all__ = ["Progressor", "level_table", "print_compare", "print_summary"]
