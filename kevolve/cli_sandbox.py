"""`kevolve sandbox …`: build the evaluation image, show which isolation is active."""

from __future__ import annotations

from typing import Annotated

import typer

app = typer.Typer(no_args_is_help=True, help="The evaluation sandbox: container image and isolation.")


@app.command("build-image")
def build_image(
    tag: Annotated[str, typer.Option(help="image name:tag")] = "kevolve-eval:latest",
    from_dockerfile: Annotated[bool, typer.Option(
        "--from-dockerfile", help="docker build sandbox/Dockerfile (CUDA, pinned; needs a registry)")] = False,
) -> None:
    """Build the worker image. Default: import a root filesystem made from this machine's Python."""
    from kevolve.sandbox.docker_backend import DockerUnavailable, docker_client
    from kevolve.sandbox.docker_image import build_dockerfile, build_local

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


def isolation_rows() -> list[tuple[str, str]]:
    """Rows for `kevolve doctor`: which confinement each backend would use here."""
    from kevolve.sandbox.bwrap import probe

    from kevolve.sandbox.containment import doctor_rows

    works, why = probe()
    rows = [("isolation (local)", f"active: {why}" if works else f"none: {why}")]
    rows += doctor_rows()
    if works:
        rows.append(("containment (bwrap)", "also a PID namespace: the kernel kills all of it with the worker"))
    try:
        from kevolve.sandbox.docker_backend import DockerUnavailable, docker_client, image_present

        client = docker_client()
        ok = image_present(client, "kevolve-eval:latest")
        rows.append(("isolation (docker)", "engine up; image kevolve-eval:latest " +
                     ("present" if ok else "missing (kevolve sandbox build-image)")))
    except DockerUnavailable as e:
        rows.append(("isolation (docker)", f"unavailable: {e}"))
    return rows


@app.command("status")
def status() -> None:
    """Which isolation each backend would use on this machine."""
    for what, how in isolation_rows():
        typer.echo(f"{what}: {how}")
