"""The archive's browser API (FastAPI) and its web page, served by ``kevolve archive serve``.

Reads are open; writes (``POST /api/import``, ``DELETE /api/kernels/{id}``) need
``Authorization: Bearer $KEVOLVE_API_TOKEN`` and are refused outright when the server has no token.
Every input is bounded and validated, so bad input is a 4xx with a message, never a 500.
"""

from __future__ import annotations

import hmac
import logging
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Path as PathParam, Query, Response
from fastapi.responses import FileResponse, JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.exc import SQLAlchemyError

from kevolve.archive.queries import SORTS
from kevolve.archive.records import (ArchivedKernel, ArchiveStats, KernelDetail, KernelFilter, ProblemSummary,
                                     RunSummary)
from kevolve.archive.sakana import to_entry
from kevolve.archive.store import Archive

log = logging.getLogger(__name__)
STATIC = Path(__file__).parent / "static"
ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
TEXT = r"^[^\x00]*$"  # PostgreSQL text cannot hold NUL
MAX_IMPORT_ROWS = 1000
BEARER = HTTPBearer(auto_error=False, description="KEVOLVE_API_TOKEN, needed for writes")


class KernelPage(BaseModel):
    """A page of kernels."""

    items: list[ArchivedKernel]
    total: int
    offset: int
    limit: int


class ProblemPage(BaseModel):
    """A page of problems."""

    items: list[ProblemSummary]
    total: int
    offset: int
    limit: int


class ImportBody(BaseModel):
    """Rows in the export layout (Sakana's columns plus ``kevolve_*``)."""

    model_config = ConfigDict(extra="forbid")
    rows: list[dict[str, Any]] = Field(max_length=MAX_IMPORT_ROWS)
    run_id: str | None = Field(default=None, max_length=128, pattern=ID_PATTERN)


class ImportResult(BaseModel):
    """What an import did."""

    rows: int
    kernels_added: int
    skipped: int
    first_error: str


class Problem4xx(BaseModel):
    """An error: what was wrong with the request."""

    detail: str


def _filters(
    level: Annotated[int | None, Query(ge=0, le=100, description="KernelBench level")] = None,
    op: Annotated[str | None, Query(max_length=256, pattern=TEXT, description="substring of the op name")] = None,
    device: Annotated[str | None, Query(max_length=256, pattern=TEXT, description="substring of the device")] = None,
    min_speedup: Annotated[float | None, Query(ge=0, le=1e9, description="best speedup at least")] = None,
    technique: Annotated[str | None, Query(max_length=64, pattern=TEXT, description="technique tag")] = None,
    outcome: Annotated[str, Query(max_length=32, pattern=r"^[a-z_]*$", description="'ok' (default), another "
                                  "outcome, or '' for any")] = "ok",
    run: Annotated[str | None, Query(max_length=128, pattern=TEXT, description="only kernels this run "
                                     "evaluated")] = None,
) -> KernelFilter:
    return KernelFilter(level=level, op=op, device=device, min_speedup=min_speedup, technique=technique,
                        outcome=outcome or None, run_id=run or None)


Filters = Annotated[KernelFilter, Depends(_filters)]
Offset = Annotated[int, Query(ge=0, le=10_000_000)]
Limit = Annotated[int, Query(ge=1, le=500)]
KernelId = Annotated[str, PathParam(pattern=ID_PATTERN, description="kernel id or a unique prefix (6+)")]
ERRORS = {401: {"model": Problem4xx}, 403: {"model": Problem4xx}, 404: {"model": Problem4xx},
          413: {"model": Problem4xx}, 503: {"model": Problem4xx}}


def create_app(archive: Archive, token: str | None = None) -> FastAPI:
    """The app for one archive; ``token`` (from KEVOLVE_API_TOKEN at the entry point) enables writes."""
    app = FastAPI(title="kevolve archive", version="1", description=__doc__)

    def require_token(cred: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)] = None) -> None:
        if not token:
            raise HTTPException(403, "writes are disabled: the server was started without KEVOLVE_API_TOKEN")
        given = cred.credentials if cred else ""
        if not given or not hmac.compare_digest(given.encode(), token.encode()):
            raise HTTPException(401, "a valid 'Authorization: Bearer <KEVOLVE_API_TOKEN>' header is required",
                                headers={"WWW-Authenticate": "Bearer"})

    @app.exception_handler(SQLAlchemyError)
    async def _db_error(_request: Any, exc: SQLAlchemyError) -> JSONResponse:
        log.error("database error: %s", exc)
        return JSONResponse({"detail": "the archive database is unavailable"}, status_code=503)

    @app.get("/api/stats", response_model=ArchiveStats)
    def stats() -> ArchiveStats:
        """Counts over the whole archive."""
        return archive.stats()

    @app.get("/api/kernels", response_model=KernelPage, responses=ERRORS)
    def kernels(f: Filters, sort: Annotated[str, Query(pattern="^(" + "|".join(SORTS) + ")$")] = "speedup",
                offset: Offset = 0, limit: Limit = 50) -> KernelPage:
        """Kernels matching the filters, sorted (speedup, runtime, created), a page at a time."""
        items, total = archive.kernels(f, sort, offset, limit)
        return KernelPage(items=items, total=total, offset=offset, limit=limit)

    @app.get("/api/kernels/{kernel_id}", response_model=KernelDetail, responses=ERRORS)
    def kernel(kernel_id: KernelId) -> KernelDetail:
        """One kernel with its source, problem, evaluations and lineage."""
        d = archive.get(kernel_id)
        if d is None:
            raise HTTPException(404, f"no kernel {kernel_id!r}")
        return d

    @app.get("/api/search", response_model=list[ArchivedKernel], responses=ERRORS)
    def search(q: Annotated[str, Query(min_length=1, max_length=20_000, pattern=TEXT, description="words or code")],
               f: Filters, k: Annotated[int, Query(ge=1, le=100)] = 10) -> list[ArchivedKernel]:
        """Hybrid (embedding + keyword) search, best first."""
        return archive.search(q, k=k, filters=f)

    @app.get("/api/runs", response_model=list[RunSummary])
    def runs(limit: Limit = 200) -> list[RunSummary]:
        """The newest runs that evaluated kernels, with how many each evaluated."""
        return archive.runs(limit)

    @app.get("/api/problems", response_model=ProblemPage)
    def problems(offset: Offset = 0, limit: Limit = 50) -> ProblemPage:
        """Problems, most kernels first."""
        items, total = archive.problems(offset, limit)
        return ProblemPage(items=items, total=total, offset=offset, limit=limit)

    @app.get("/api/problems/{problem_id}/leaderboard", response_model=list[ArchivedKernel], responses=ERRORS)
    def leaderboard(problem_id: Annotated[str, PathParam(pattern=ID_PATTERN)],
                    limit: Annotated[int, Query(ge=1, le=500)] = 20) -> list[ArchivedKernel]:
        """A problem's ok kernels, fastest first."""
        items, total = archive.kernels(KernelFilter(problem_id=problem_id), "speedup", 0, limit)
        return items

    @app.post("/api/import", response_model=ImportResult, responses=ERRORS, dependencies=[Depends(require_token)])
    def import_rows(body: ImportBody) -> ImportResult:
        """Import rows in the export layout (token required)."""
        entries, skipped, first = [], 0, ""
        for n, row in enumerate(body.rows, 1):
            try:
                entries.append(to_entry(row, body.run_id))
            except (ValueError, TypeError, OverflowError) as e:
                skipped += 1
                first = first or f"row {n}: {str(e).splitlines()[0][:200] if str(e) else type(e).__name__}"
        added = archive.put_many(entries, run_kind="import") if entries else 0
        return ImportResult(rows=len(body.rows), kernels_added=added, skipped=skipped, first_error=first)

    @app.delete("/api/kernels/{kernel_id}", status_code=204, responses=ERRORS, dependencies=[Depends(require_token)])
    def delete_kernel(kernel_id: KernelId) -> Response:
        """Remove a kernel (token required)."""
        if not archive.delete(kernel_id):
            raise HTTPException(404, f"no kernel {kernel_id!r}")
        return Response(status_code=204)

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app
