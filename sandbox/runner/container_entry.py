"""Container entry point: `python -m kevolve.sandbox.runner.container_entry DEVICE`.

The same runner as the local backend (kevolve.sandbox.runner.serve), in /scratch, talking to the judge on
the host through the FIFOs `cmd` / `res` that the host created in the bind-mounted scratch directory.
"""

from __future__ import annotations

import runpy
import sys


def main() -> None:
    sys.argv = ["kevolve.sandbox.runner.serve", *sys.argv[1:]]
    runpy.run_module("kevolve.sandbox.runner.serve", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
