"""Judge-side checks of one runner call: outputs against the truth, inputs untouched, fingerprints.

Runs in the judge, on the device where the shared buffers live: the runner's staged outputs are
compared with the truth of the draw whose values were in the slot, with the tolerance rule of
`correctness.py`. Every call is checked, warm-ups, timed calls and the profiled call included.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field
from typing import Any

import torch

from kevolve.records import CheckResult
from kevolve.sandbox.judge.correctness import NEAR_MISS, Mismatch, compare_one


def fingerprint(ts: list[torch.Tensor]) -> tuple[int, ...]:
    """Integers identifying the exact bits of some tensors: equal bits give equal prints, and
    different real outputs different ones (sums of the words, and of every 7th word, no copies)."""
    out: list[int] = []
    for t in ts:
        if not t.numel():
            out.append(0)
            continue
        b = t.detach().contiguous().reshape(-1).view(torch.uint8)  # 0-dim: no byte view
        v = b.view(torch.int32) if b.numel() % 4 == 0 else b
        out += [t.numel(), *_sums(v), int(v[-1])]
    return tuple(out)


_PRINT_CHUNK = 7 << 22  # words per step (a multiple of 7): a 7 GiB output is not widened to a 14 GiB int64 copy


def _sums(v: torch.Tensor, chunk: int = _PRINT_CHUNK) -> tuple[int, int]:
    """(sum of the words, sum of every 7th word) in int64, `chunk` words at a time; one host sync.
    Summing the whole view with dtype=int64 made an int64 copy of it: KernelBench's 7.5 GB InstanceNorm
    output asked for 14 GiB more on an H100 whose judge already held the draws (2026-11-25)."""
    acc = torch.zeros(2, dtype=torch.int64, device=v.device)
    for s in range(0, v.numel(), chunk):
        c = v[s:s + chunk]
        acc += torch.stack([c.sum(dtype=torch.int64), c[::7].sum(dtype=torch.int64)])
    a, b = acc.tolist()
    return int(a), int(b)


_KEY_WORDS = 1 << 22  # weights a keyed print cycles through (32 MiB of int64 on each device that needs them)
_key_weights: dict[str, torch.Tensor] = {}
_KEY = secrets.token_bytes(32)  # this judge's own: no runner can know it


def _chunk_factor(j: int) -> int:
    """The secret odd multiplier of a keyed print's j-th run of weights (two runs never share a weighting)."""
    return int.from_bytes(hashlib.blake2b(j.to_bytes(8, "little"), key=_KEY, digest_size=8).digest(), "little",
                          signed=True) | 1


def _weights(device: torch.device) -> torch.Tensor:
    w = _key_weights.get(str(device))
    if w is None:
        g = torch.Generator(device="cpu").manual_seed(int.from_bytes(_KEY[:8], "little"))
        w = torch.randint(-(2**63), 2**63 - 1, (_KEY_WORDS,), generator=g, dtype=torch.int64).to(device)
        _key_weights[str(device)] = w
    return w


def keyed_print(ts: list[torch.Tensor]) -> tuple[int, ...]:
    """Integers identifying the exact bits of some tensors under this judge's secret key: the sum of every 32-bit word
    times a secret random 64-bit weight (wrapping), the weights differing from run to run of `_KEY_WORDS` words. An
    input changed in place goes unseen only if its changes cancel under weights the runner cannot know: a chance of
    2**-32 or less for any change it chooses (`fingerprint`'s plain sums are kept by any swap of two words that are
    both, or both not, at a multiple of 7: red team 6)."""
    out: list[int] = []
    for t in ts:
        if not t.numel():
            out.append(0)
            continue
        b = t.detach().contiguous().reshape(-1).view(torch.uint8)  # 0-dim: no byte view
        v = b.view(torch.int32) if b.numel() % 4 == 0 else b
        w = _weights(v.device)
        acc = torch.zeros((), dtype=torch.int64, device=v.device)
        for j, s in enumerate(range(0, v.numel(), _KEY_WORDS)):
            c = v[s:s + _KEY_WORDS]
            acc += (c.to(torch.int64) * w[:c.numel()]).sum() * _chunk_factor(j)
        out += [t.numel(), int(acc)]
    return tuple(out)


def intact(slot: list[Any], pristine: list[Any]) -> int | None:
    """Index of the first input tensor the call changed, or None."""
    for i, (a, b) in enumerate(zip(slot, pristine, strict=True)):
        if isinstance(a, torch.Tensor):
            if b.device != a.device:
                b = b.to(a.device)
            if not torch.equal(a.contiguous().reshape(-1).view(torch.uint8) if a.numel() else a,
                               b.contiguous().reshape(-1).view(torch.uint8) if b.numel() else b):
                return i
    return None


@dataclass(frozen=True)
class Call:
    """One checked call as the judge saw it."""

    n: int
    key: str  # the draw whose values were in the slot
    phase: str  # warmup | check | again | inplace | timed | fresh | profile
    ms: float
    wall_ms: float
    check: CheckResult
    miss: Mismatch | None
    print_: tuple[int, ...] = ()
    judge_ms: float = 0.0  # the judge's own clock, from sending the call to its answer
    host_ms: float = 0.0


@dataclass
class Ledger:
    """Every call of one candidate, in order."""

    calls: list[Call] = field(default_factory=list)

    def add(self, call: Call) -> Call:
        self.calls.append(call)
        return call

    @property
    def misses(self) -> list[Call]:
        return [c for c in self.calls if c.miss is not None]

    def times(self, *phases: str) -> list[float]:
        return [c.ms for c in self.calls if c.phase in phases]


def check_call(n: int, key: str, phase: str, staged: list[torch.Tensor] | None, truth: list[torch.Tensor],
               eager_err: tuple[tuple[float, ...], ...], factor: float, ms: float, wall_ms: float,
               shape_note: str = "", judge_ms: float = 0.0, host_ms: float = 0.0) -> Call:
    """Compare one call's staged outputs (None: not staged, `shape_note` says why) with the truth."""
    name = f"{key}@{phase}{n}"
    if staged is None:
        detail = shape_note or "outputs were not staged"
        miss = Mismatch(name, "shape", detail)
        return Call(n, key, phase, ms, wall_ms, CheckResult(name=f"correct:{name}", passed=False, detail=detail), miss,
                    judge_ms=judge_ms, host_ms=host_ms)
    dev = staged[0].device if staged else torch.device("cpu")
    truth = [t.to(dev) for t in truth]
    prints: list[tuple[int, ...]] = []  # fingerprints the comparison's own pass made, if it made them all
    check, miss = compare_one(name, staged, truth, eager_err, factor, prints)
    print_ = tuple(x for p in prints for x in p) if len(prints) == len(staged) else fingerprint(staged)
    return Call(n, key, phase, ms, wall_ms, check, miss, print_, judge_ms, host_ms)


def classify(ledger: Ledger, truth_prints: dict[str, tuple[int, ...]], plain: set[str]) -> str:
    """The reason for the first failure that matters, most specific first."""
    misses = ledger.misses
    for c in misses:
        if c.miss and c.miss.kind == "poison":
            return f"stale_memory: draw {c.key}: {c.miss.detail} (allocator reuse)"
    for c in misses:
        for o in ledger.calls:  # bit-identical to the output of a call on other values
            if o.key != c.key and c.print_ and o.print_ == c.print_ and truth_prints.get(o.key) != truth_prints.get(c.key):
                return (f"stale_cache: output for draw {c.key} ({c.phase} call {c.n}) repeats the output for draw "
                        f"{o.key} (call {o.n}): result cached across calls")
    first = misses[0]
    assert first.miss is not None
    where = f"draw {first.key} ({first.phase} call {first.n})"
    if first.phase in ("timed", "fresh", "profile"):
        return f"degrades_over_calls: right on first calls, wrong on {where}: {first.miss.detail}"
    if first.key in plain:
        if first.miss.kind == "value" and first.miss.err < NEAR_MISS:
            return f"reduced_precision: {where}: {first.miss.detail} — the error of lower-precision arithmetic"
        if first.phase in ("again", "inplace"):
            return f"stale_cache: {where}: {first.miss.detail} (result cached across calls)"
        return f"incorrect: {where}: {first.miss.detail}"
    return f"off_distribution: right on get_inputs() draws, wrong on the '{first.key}' draw: {first.miss.detail}"


__all__ = ["Call", "Ledger", "check_call", "classify", "fingerprint", "intact"]
