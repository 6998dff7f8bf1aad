"""The innovation archive: every evaluated kernel, searchable, browsable, exportable.

Use from the agent (the retrieve step)::

    from kevolve.archive import retrieve
    hits = retrieve(problem.source, k=5)          # list[ArchivedKernel], best first
    for h in hits:
        h.speedup, h.techniques, h.source          # what goes into translate / mutate prompts

``retrieve`` opens the default archive (``$KEVOLVE_DB``, else ``sqlite:///$KEVOLVE_HOME/archive.db``,
KEVOLVE_HOME defaulting to ``~/.kevolve``) unless given ``archive=`` (an ``Archive`` or any object with
``search``) or ``db_url=``; it returns only ok kernels, and ``[]`` when there is no archive yet, it is
empty, or it cannot be opened (logged): retrieval never stops a run.

Storing: ``Archive(url).put(problem, candidate, evaluation, run_id=None)``; many at once:
``Archive.put_many([Entry(...), ...])``. Browsing: ``kevolve archive serve``. Files:
``kevolve archive export/import`` (JSONL / Parquet, Sakana-compatible columns, see ``sakana.py``).

Nothing heavy is imported by this module itself: SQLAlchemy, torch and the model load on first use.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kevolve.archive.records import ArchivedKernel, KernelFilter
    from kevolve.archive.store import Archive, Entry

__all__ = ["Archive", "ArchivedKernel", "Entry", "KernelFilter", "known", "open_archive", "retrieve"]

_opened: dict[str, Any] = {}


def open_archive(db_url: str | None = None) -> Archive:
    """The Archive at ``db_url`` (default: ``db.default_url()``), opened once per process and URL."""
    from kevolve.archive.db import default_url
    from kevolve.archive.store import Archive

    url = db_url or default_url()
    if url not in _opened:
        _opened[url] = Archive(url)
    return _opened[url]


def retrieve(problem_source: str, k: int = 5, *, archive: Any = None, db_url: str | None = None,
             filters: KernelFilter | None = None) -> list[ArchivedKernel]:
    """The top-k ok kernels for problems similar to ``problem_source`` (with source, speedup, techniques).

    Never creates an archive and never fails a run: with no archive file, an empty archive, or an
    archive that cannot be opened, it logs why and returns ``[]``.
    """
    import logging

    from kevolve.archive.db import ArchiveError, default_url
    from kevolve.archive.embed import EmbeddingError
    from kevolve.archive.records import KernelFilter

    log = logging.getLogger(__name__)
    f = filters or KernelFilter(outcome="ok")
    if archive is None:
        url = db_url or default_url()
        if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).expanduser().exists():
            log.info("no archive at %s: nothing to retrieve", url)
            return []
        try:
            archive = open_archive(url)
            if archive.kernels(f, limit=1)[1] == 0:
                return []
        except ArchiveError as e:
            log.warning("archive unavailable, retrieving nothing: %s", e)
            return []
    try:
        return archive.search(problem_source, k=k, filters=f)
    except EmbeddingError as e:
        log.warning("archive search unavailable, retrieving nothing: %s", e)
        return []


def known(problem_id: str, cuda: bool, k: int = 2, *, archive: Any = None,
          db_url: str | None = None) -> list[ArchivedKernel]:
    """The archive's fastest ok kernels faster than eager of this very problem (the same source: a problem optimized before, or a part
    met in another model), with their sources, measured on the same kind of device (`cuda`: a GPU, else the CPU),
    fastest first. Like ``retrieve``, never creates an archive and never fails a run (``[]``, logged)."""
    import logging

    from kevolve.archive.db import default_url
    from kevolve.archive.records import KernelFilter

    log = logging.getLogger(__name__)
    if archive is None:
        url = db_url or default_url()
        if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).expanduser().exists():
            return []
    try:
        archive = archive if archive is not None else open_archive(url)
        found = archive.kernels(KernelFilter(problem_id=problem_id, outcome="ok"), "speedup", 0, 4 * k,
                                with_source=True)[0]
    except Exception as e:  # noqa: BLE001 — an unreachable or broken archive: the run goes on without it
        log.warning("archive unavailable, reusing nothing: %s", str(e).splitlines()[0][:200] if str(e) else e)
        return []
    # CPU verdicts name the device "cpu (...)" (sandbox/common/harness.py); a kernel timed on a GPU says which
    same = [h for h in found if h.source and h.device.startswith("cpu") != cuda and (h.speedup or 0.0) > 1.0]
    return same[:k]


def __getattr__(name: str) -> Any:
    if name in ("Archive", "Entry"):
        from kevolve.archive import store

        return getattr(store, name)
    if name in ("ArchivedKernel", "KernelFilter"):
        from kevolve.archive import records

        return getattr(records, name)
    raise AttributeError(name)
