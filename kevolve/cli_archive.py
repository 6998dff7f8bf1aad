"""`kevolve archive serve | search | show | export | import` (the archive package loads inside commands)."""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Iterator, Optional

import typer

from kevolve.cli_common import check_db_path, fail

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="The kernel archive: browse, search, export and import verified kernels.")

DbOpt = Annotated[Optional[str], typer.Option("--db", help="database URL (default: $KEVOLVE_DB, else "
                                              "sqlite:///$KEVOLVE_HOME/archive.db, KEVOLVE_HOME=~/.kevolve)")]
EmbedOpt = Annotated[str, typer.Option("--embedder", hidden=True, help="minilm (default) or hashing (tests)")]


@contextmanager
def _errors() -> Iterator[None]:
    """Bad input, unreachable databases and missing packages become one line on stderr and exit code 2."""
    try:
        from sqlalchemy.exc import SQLAlchemyError

        from kevolve.archive.db import ArchiveError
        from kevolve.archive.embed import EmbeddingError
        from kevolve.archive.sakana import FileFormatError
    except ModuleNotFoundError as e:
        from kevolve.extras import install_hint

        fail(install_hint(e.name or ""))
    try:
        yield
    except ModuleNotFoundError as e:
        from kevolve.extras import install_hint

        fail(install_hint(e.name or ""))
    except (ArchiveError, EmbeddingError, FileFormatError, ValueError) as e:
        fail(str(e).splitlines()[0] if str(e) else type(e).__name__)
    except SQLAlchemyError as e:
        fail(f"database error: {str(getattr(e, 'orig', None) or e).strip().splitlines()[0]}")


def _open(db: str | None, embedder: str = "minilm", *, reading: bool):  # noqa: ANN202
    """The archive at --db (else $KEVOLVE_DB, else the default home). `reading`: the command only reads, so it
    creates nothing (cli_common.check_db_path)."""
    from kevolve.archive.db import default_url
    from kevolve.archive.embed import HashingEmbedder
    from kevolve.archive.store import Archive

    if embedder not in ("minilm", "hashing"):
        fail(f"--embedder must be minilm or hashing, not {embedder!r}")
    url = db or default_url()
    check_db_path(url, bool(db or os.environ.get("KEVOLVE_DB")), reading)
    return Archive(url, embedder=HashingEmbedder() if embedder == "hashing" else None)


def _filters(level: int | None, op: str | None, device: str | None, min_speedup: float | None,
             technique: str | None, any_outcome: bool, run: str | None = None):  # noqa: ANN202
    from kevolve.archive.records import KernelFilter

    return KernelFilter(level=level, op=op, device=device, min_speedup=min_speedup, technique=technique,
                        outcome=None if any_outcome else "ok", run_id=run)


Level = Annotated[Optional[int], typer.Option(help="KernelBench level")]
Op = Annotated[Optional[str], typer.Option(help="substring of the op name, e.g. matmul")]
Device = Annotated[Optional[str], typer.Option(help="substring of the device name, e.g. H100")]
MinSpeedup = Annotated[Optional[float], typer.Option(help="best speedup over eager at least this")]
Technique = Annotated[Optional[str], typer.Option(help="technique tag, e.g. shared_memory, tensor_cores")]
AnyOutcome = Annotated[bool, typer.Option("--any-outcome", help="include kernels that were not ok")]
Run = Annotated[Optional[str], typer.Option("--run", help="only kernels this run evaluated (its run id)")]


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="words, or a path to a problem file to find kernels for")],
    db: DbOpt = None, k: Annotated[int, typer.Option("-k", min=1, max=100, help="how many")] = 10,
    level: Level = None, op: Op = None, device: Device = None, min_speedup: MinSpeedup = None,
    technique: Technique = None, any_outcome: AnyOutcome = False, run: Run = None,
    json_out: Annotated[bool, typer.Option("--json", help="one JSON object per line")] = False,
    embedder: EmbedOpt = "minilm",
) -> None:
    """Hybrid (embedding + keyword) search over kernels."""
    text = query
    if len(query) < 4096 and Path(query).is_file():
        try:
            text = Path(query).read_text()
        except (OSError, UnicodeDecodeError) as e:
            fail(f"{query}: cannot read: {e}")
    with _errors():
        hits = _open(db, embedder, reading=True).search(text, k=k, filters=_filters(level, op, device, min_speedup, technique,
                                                                     any_outcome, run))
    if json_out:
        for h in hits:
            sys.stdout.write(h.model_dump_json(exclude={"source"}) + "\n")
        return
    from rich.console import Console
    from rich.table import Column, Table

    # ids and numbers are never cut (an id is what `archive show` takes): only the words wrap; piped, the table
    # is as wide as it needs (a console not on a terminal is 80 columns, which cut ids to '89e7e6f…')
    whole = lambda name, values: Column(name, no_wrap=True, min_width=max(map(len, [name, *values])))  # noqa: E731
    fmt = lambda x: "-" if x is None else f"{x:.2f}x"  # noqa: E731
    table = Table(whole("id", [h.id for h in hits]), "problem", "level", whole("speedup", [fmt(h.speedup) for h in hits]),
                  whole("vs compile", [fmt(h.speedup_compile) for h in hits]), "techniques", "device",
                  whole("score", [f"{h.score:.4f}" for h in hits if h.score]))
    for h in hits:
        table.add_row(h.id, h.problem_name, str(h.level or "-"), fmt(h.speedup), fmt(h.speedup_compile),
                      ", ".join(h.techniques), h.device, f"{h.score:.4f}" if h.score else "")
    (Console() if sys.stdout.isatty() else Console(width=240)).print(table if hits else "no kernels match")


@app.command()
def show(kernel_id: Annotated[str, typer.Argument(help="kernel id (or a unique prefix of 6+ characters)")],
         db: DbOpt = None, json_out: Annotated[bool, typer.Option("--json")] = False,
         embedder: EmbedOpt = "minilm") -> None:
    """One kernel: source, evaluations, lineage."""
    with _errors():
        d = _open(db, embedder, reading=True).get(kernel_id)
    if d is None:
        fail(f"no kernel {kernel_id!r} in the archive")
    if json_out:
        sys.stdout.write(d.model_dump_json() + "\n")
        return
    from rich.console import Console
    from rich.syntax import Syntax

    k, con = d.kernel, Console(soft_wrap=True)  # lines are never cut: piped to a file, the source stays whole
    tty = sys.stdout.isatty()
    level = "" if k.level is None else f" (level {k.level})"
    speed = ", ".join(f"{x:.2f}x {vs}" for x, vs in ((k.speedup, "eager"), (k.speedup_compile, "compile"))
                      if x is not None)
    con.print(f"[bold]{k.id}[/]  {k.problem_name}{level}  {k.outcome}  speedup {speed or '—'}  on {k.device or '?'}",
              highlight=False)
    con.print(f"techniques: {', '.join(k.techniques) or '-'}   parents: {', '.join(d.parent_ids) or '-'}",
              highlight=False)
    for e in d.evaluations:
        con.print(f"  {e.created_at:%Y-%m-%d %H:%M}  {e.outcome:<14} {e.reason if not tty else e.reason[:90]}",
                  highlight=False, markup=False)
    if tty:
        con.print(Syntax(k.source or "", "python", line_numbers=True))
    else:  # the code as it is, to be saved or diffed
        sys.stdout.write((k.source or "").rstrip("\n") + "\n")


@app.command("export")
def export_cmd(path: Annotated[Path, typer.Argument(help="output file: .jsonl or .parquet")], db: DbOpt = None,
               fmt: Annotated[Optional[str], typer.Option("--format", help="jsonl or parquet (default: suffix)")] = None,
               level: Level = None, op: Op = None, device: Device = None, min_speedup: MinSpeedup = None,
               technique: Technique = None, ok_only: Annotated[bool, typer.Option(help="only ok kernels")] = False,
               run: Run = None, embedder: EmbedOpt = "minilm") -> None:
    """Export kernels with Sakana-archive-compatible columns."""
    if fmt not in (None, "jsonl", "parquet"):
        fail(f"--format must be jsonl or parquet, not {fmt!r}")
    if not path.parent.is_dir():
        fail(f"{path.parent}: no such folder")
    if (fmt or path.suffix.lstrip(".")) == "parquet":  # before the archive is looked for: what to install first
        from kevolve.extras import missing

        why = missing("pyarrow")
        if why:
            fail(why)
    with _errors():
        from kevolve.archive.transfer import export

        f = _filters(level, op, device, min_speedup, technique, not ok_only, run)
        n = export(_open(db, embedder, reading=True), path, fmt, f)
    typer.echo(f"exported {n} kernels to {path}")


@app.command("import")
def import_cmd(path: Annotated[Path, typer.Argument(help="a run folder, or a .jsonl / .parquet export")],
               db: DbOpt = None, run_id: Annotated[Optional[str], typer.Option(help="record under this run")] = None,
               json_out: Annotated[bool, typer.Option("--json")] = False, embedder: EmbedOpt = "minilm") -> None:
    """Import kernels from a run folder or an export file (ours or Sakana's)."""
    if not path.exists():
        fail(f"{path}: no such file or folder")
    with _errors():
        from kevolve.archive.transfer import import_path

        r = import_path(_open(db, embedder, reading=False), path, run_id)
    if json_out:
        sys.stdout.write(json.dumps(r.__dict__) + "\n")
    else:
        typer.echo(f"read {r.rows} rows: {r.kernels_added} new kernels, {r.skipped} skipped"
                   + (f" (first: {r.first_error})" if r.first_error else ""))


@app.command()
def serve(db: DbOpt = None, host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
          port: Annotated[int, typer.Option(min=0, max=65535)] = 8765, embedder: EmbedOpt = "minilm") -> None:
    """The browser API and web page. Writes (import, delete) need $KEVOLVE_API_TOKEN as a Bearer token."""
    with _errors():
        import uvicorn

        from kevolve.archive.web import create_app

        arch = _open(db, embedder, reading=False)  # the page can import (with a token): an empty archive serves

    token = os.environ.get("KEVOLVE_API_TOKEN") or None
    sock = _listen(host, port)  # bound before a word is said: a busy port is one error line, nothing served
    where = sock.getsockname()[:2]
    typer.echo(f"serving {arch.url} on http://{where[0]}:{where[1]}/ (writes {'need a token' if token else 'disabled'})")
    server = uvicorn.Server(uvicorn.Config(create_app(arch, token=token), log_level="warning"))
    server.run(sockets=[sock])


def _listen(host: str, port: int):  # noqa: ANN202 - a bound, listening socket.socket
    """A socket bound to (host, port) and listening, or one `error:` line: the port busy, the address not here."""
    import errno
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        fail(f"cannot serve on {host}:{port}: {e.strerror}")
    family, _, _, _, addr = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: a restart need not wait
    try:
        sock.bind(addr)
        sock.listen(2048)
    except OSError as e:
        sock.close()
        busy = " (another program is listening there: stop it, or pick another --port)" if e.errno == errno.EADDRINUSE else ""
        fail(f"cannot serve on {host}:{port}: {e.strerror}{busy}")
    return sock
