"""`kevolve sandbox …`: build the evaluation image, show which isolation is active."""

from __future__ import annotations

from typing import Annotated

import typer

app = typer.Typer(no_args_is_help=True, help="The evaluation sandbox: container image, isolation, and the warm judge service.")


@app.command("build-image")
def build_image(
    tag: Annotated[str, typer.Option(help="image name:tag")] = "kevolve-eval:latest",
    from_dockerfile: Annotated[bool, typer.Option(
        "--from-dockerfile", help="docker build sandbox/Dockerfile (CUDA, pinned; needs a registry)")] = False,
) -> None:
    """Build the runner image. Default: import a root filesystem made from this machine's Python."""
    from kevolve.sandbox.isolate.container import DockerUnavailable, docker_client
    from kevolve.sandbox.isolate.docker_image import build_dockerfile, build_local

    try:
        client = docker_client()
    except DockerUnavailable as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    try:
        image_id = (build_dockerfile if from_dockerfile else build_local)(tag, client)
    except Exception as e:  # noqa: BLE001 - the engine's error, in one line
        typer.echo(f"error: building {tag} failed: {str(e).splitlines()[0][:300]}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"{tag} {image_id}")


def isolation_rows(bwrap: str | None = None, gpu: bool = False) -> list[tuple[str, str]]:
    """Rows for `kevolve doctor`: which confinement each backend would use here (`bwrap`: the
    configured binary, None = bwrap on PATH; `gpu`: also try bwrap with a CUDA worker)."""
    from kevolve.sandbox.isolate.bwrap import probe

    from kevolve.sandbox.isolate.containment import doctor_rows

    works, why = probe("cpu", bwrap)
    rows = [("isolation (local)", f"active: {why}" if works else f"none: {why}")]
    if gpu and works:
        gpu_works, gpu_why = probe("cuda", bwrap)
        rows.append(("isolation (local, GPU)", f"active: {gpu_why}" if gpu_works else f"none: {gpu_why}"))
    rows += doctor_rows()
    from kevolve.sandbox.isolate import landlock

    v = landlock.abi()
    rows.append(("writes (isolation none)", f"Landlock ABI {v}: a candidate's runner (CPU or GPU) may read only its view and write only its "
                 "scratch (confine_writes)" if v else
                 "no Landlock in this kernel: a candidate without a sandbox can write what the user can"))
    if works:
        rows.append(("containment (bwrap)", "also a PID namespace: the kernel kills all of it with the runner"))
    try:
        from kevolve.sandbox.isolate.container import DockerUnavailable, docker_client, image_present, nvidia_runtime

        client = docker_client()
        ok = image_present(client, "kevolve-eval:latest")
        rows.append(("isolation (docker)", "engine up; image kevolve-eval:latest " +
                     ("present" if ok else "missing (kevolve sandbox build-image)")))
        rows.append(("docker runners left behind", _left_behind_row(client)))
        if gpu:
            rows.append(("docker GPU", "the NVIDIA runtime's device request" if nvidia_runtime(client) else
                         "no NVIDIA runtime: device nodes and driver libraries passed by kevolve"))
    except DockerUnavailable as e:
        rows.append(("isolation (docker)", f"unavailable: {e}"))
    return rows


def _left_behind_row(client: object) -> str:
    from kevolve.sandbox.isolate.container import engine_error, left_behind

    try:
        orphans, unowned = left_behind(client)
    except Exception as e:  # noqa: BLE001 - the engine's error, in one line
        return f"not known: {engine_error(e)}"
    if not orphans and not unowned:
        return "none"
    parts = [f"{len(orphans)} of judges that are gone"] if orphans else []
    parts += [f"{len(unowned)} without an owner label (kevolve before 2026-11-25)"] if unowned else []
    return ", ".join(parts) + " (kevolve sandbox prune" + (" --all" if unowned else "") + ")"


@app.command("prune")
def prune(
    all_: Annotated[bool, typer.Option("--all", help="also runner containers without an owner label (left by "
                                                     "older kevolve): stop running evaluations first")] = False,
) -> None:
    """Remove runner containers left behind by judges that are gone (a judge starting does this too)."""
    from kevolve.sandbox.isolate.container import (DockerUnavailable, docker_client, engine_error, left_behind,
                                                   remove_containers)

    try:
        client = docker_client()
        orphans, unowned = left_behind(client)
    except DockerUnavailable as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    except Exception as e:  # noqa: BLE001 - the engine's error, in one line
        typer.echo(f"error: listing runner containers: {engine_error(e)}", err=True)
        raise typer.Exit(1) from None
    removed = remove_containers(orphans + (unowned if all_ else []))
    line = f"removed {removed} runner container(s)"
    if unowned and not all_:
        line += f"; {len(unowned)} without an owner label left (--all removes them)"
    typer.echo(line)


def _gpu_visible() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


@app.command("status")
def status() -> None:
    """Which isolation each backend would use on this machine."""
    import os

    from kevolve.sandbox.config import BWRAP_ENV

    for what, how in isolation_rows(os.environ.get(BWRAP_ENV) or None, _gpu_visible()):
        typer.echo(f"{what}: {how}")


@app.command("warm-status")
def warm_status(
    json_out: Annotated[bool, typer.Option("--json", help="one JSON object per service, one a line")] = False,
) -> None:
    """The warm judge services `kevolve eval` keeps for this user: pid, device, evaluations served, idle time."""
    import json

    from kevolve.sandbox.parent.warm_client import status_all
    from kevolve.sandbox.parent.warm_key import WarmUnavailable

    try:
        services = status_all()
    except WarmUnavailable as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    running = [(f, s) for f, s in services if s is not None]
    for files, s in running:
        if json_out:
            typer.echo(json.dumps({"key": files.digest, **s}))
        else:
            busy = s.get("doing", "evaluating") if s["busy"] else f"idle {s['idle_for_s']:.0f} s of {s['idle_s']:.0f}"
            typer.echo(f"{files.digest}: pid {s['pid']}, {s['device']} ({s['backend']}, isolation {s['isolation']}), "
                       f"{s['served']} evaluation(s), {busy}")
    if not running and not json_out:
        typer.echo("no warm judge service running")


@app.command("warm-stop")
def warm_stop() -> None:
    """Stop this user's warm judge services (each finishes an evaluation under way); the next `kevolve eval` starts
    one again unless --no-warm or KEVOLVE_WARM=0."""
    from kevolve.sandbox.parent.warm_client import stop_all
    from kevolve.sandbox.parent.warm_key import WarmUnavailable

    try:
        n = stop_all()
    except WarmUnavailable as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"stopped {n} warm judge service(s)")
