"""KernelBench's published baseline timings; the baseline cache itself lives in the sandbox.

`kevolve.sandbox.parent.baselines` holds `BaselineCache` and `BenchSandbox` (the evaluation infrastructure
in one place); they are re-exported here for the bench modules.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from kevolve.sandbox.parent.baselines import (Baseline, BaselineCache, BenchSandbox, device_fingerprint, fits,
                                       harness_version, torch_version)


def load_published(path: str | Path) -> dict[tuple[int, str], float]:
    """KernelBench's published baseline JSON ({'level1': {'19_ReLU.py': {'mean': …}}}) -> ms."""
    data = json.loads(Path(path).read_text())
    out: dict[tuple[int, str], float] = {}
    for level_key, probs in data.items():
        m = re.fullmatch(r"level(\d+)", level_key)
        if not m:
            continue
        for fname, rec in probs.items():
            if isinstance(rec, dict) and isinstance(rec.get("mean"), (int, float)):
                out[(int(m.group(1)), fname)] = float(rec["mean"])
    return out


__all__ = ["Baseline", "BaselineCache", "BenchSandbox", "device_fingerprint", "fits", "harness_version",
           "load_published", "torch_version"]
