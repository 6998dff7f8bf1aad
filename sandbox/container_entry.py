"""Container entry point: `python -m kevolve.sandbox.container_entry DEVICE`.

The same worker as the local backend (kevolve.sandbox.worker), in /scratch. Docker gives no
convenient stdin to a detached container, so the worker's "go" line arrives through the named pipe
./go that the host created in the bind-mounted scratch directory. Opened read-write, the pipe never
reports end-of-file while we wait, whether or not the host has opened it yet.
"""

from __future__ import annotations

import os
import runpy
import sys


def main() -> None:
    fd = os.open("go", os.O_RDWR)
    os.dup2(fd, 0)
    os.close(fd)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the worker reads one line from it
    sys.argv = ["kevolve.sandbox.worker", *sys.argv[1:]]
    runpy.run_module("kevolve.sandbox.worker", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
