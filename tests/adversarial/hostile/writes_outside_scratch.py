"""Hostile: write outside the scratch directory (the checkout, system folders, home).

The test fills in target paths below. An honest ReLU unless one write succeeds, in which case it
returns wrong results. A path under /tmp (a checkout cloned there, say) exists inside the worker
only as part of its private /tmp, so writing there proves nothing; the test's check that no target
exists on the host afterwards covers every path. Expected: ok, and no target on the host.
"""
import torch
import torch.nn as nn

TARGETS = __TARGETS__


def _write(path):
    try:
        with open(path, "w") as f:
            f.write("pwned")
        return True
    except OSError:
        return False


WROTE = [p for p in TARGETS if _write(p) and not p.startswith("/tmp/")]


class ModelNew(nn.Module):
    def forward(self, x):
        if WROTE:
            return x.clone()
        return torch.relu(x)
