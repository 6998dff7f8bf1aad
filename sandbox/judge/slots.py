"""Input slots: the shared buffers a runner's forward reads, filled by the judge from pristine draws.

Each slot is one argument list. Its tensors are judge-owned shared buffers (`transport.py`); the
judge copies a draw's pristine values in before a call and checks afterwards that the call left
them untouched. With room for it every draw has a slot of its own; a problem too large for that
(host residency) gets two slots that are refilled as calls move between draws.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import torch

from kevolve.sandbox.judge.checks import intact
from kevolve.sandbox.judge.oracle import ProblemState
from kevolve.sandbox.common.transport import SharedBuffer


class Slot:
    """One argument list whose tensors are shared buffers."""

    def __init__(self, like: list[Any], folder: Path | None, device: torch.device) -> None:
        self.bufs: list[SharedBuffer | None] = []
        self.values: list[Any] = []
        enc = []
        for v in like:
            if isinstance(v, torch.Tensor):
                b = SharedBuffer(v, folder, device)
                self.bufs.append(b)
                self.values.append(b.tensor)
                enc.append({"tensor": b.ref.model_dump()})
            else:
                self.bufs.append(None)
                self.values.append(v)
                enc.append({"value": _plain(v)})
        self.encoding = {"seq": enc, "tuple": False}
        self.holds = ""
        self.print_: tuple[int, ...] = ()  # of the values filled in, where pristine lives on the host

    def fill(self, key: str, pristine: list[Any], by_print: bool = False) -> bool:
        """Copy a draw's values in; False if its non-tensor arguments differ from this slot's. `by_print`: the
        pristine values are made again when asked for (residency "regenerated"): checked by keyed print."""
        if not self.put(key, pristine, ()):
            return False
        self.print_ = self._print() if by_print or self._host(pristine) else ()
        return True

    def put(self, key: str, values: list[Any], print_: tuple[int, ...]) -> bool:
        """`fill` from values the judge made ready beforehand on this slot's device, with their print where one
        is kept (judge/gated.py: only the copies run between a gated batch's calls)."""
        for i, v in enumerate(values):
            if self.bufs[i] is None and v != self.values[i]:
                return False
        for b, v in zip(self.bufs, values, strict=True):
            if b is not None:
                b.tensor.copy_(v)
        self.holds, self.print_ = key, print_
        return True

    def needs_print(self, key_lazy: bool, pristine: list[Any]) -> bool:
        """Whether `fill` keeps a keyed print of these values (made again, or kept on the host)."""
        return key_lazy or self._host(pristine)

    def _host(self, pristine: list[Any]) -> bool:
        return any(isinstance(v, torch.Tensor) and b is not None and v.device != b.tensor.device
                   for v, b in zip(pristine, self.bufs, strict=True))

    def _print(self) -> tuple[int, ...]:
        """The slot's inputs under the judge's secret key (checks.keyed_print: no change a runner chooses keeps it)."""
        from kevolve.sandbox.judge.checks import keyed_print

        return keyed_print([b.tensor for b in self.bufs if b is not None])

    def changed(self, pristine: Any) -> int | None:
        """Index of an input the call changed (exact where the pristine copy is on the same device;
        by the judge's keyed print where it lives in host memory or is made again, to spare a copy of every input per
        call).
        `pristine`: the values, or a function that gives them (not called when the fingerprint decides)."""
        if self.print_:
            return None if self._print() == self.print_ else 0
        return intact(self.values, pristine() if callable(pristine) else pristine)

    def hide(self) -> None:
        for b in self.bufs:
            if b is not None:
                b.hide()

    def free(self) -> None:
        for b in self.bufs:
            if b is not None:
                b.free()


def _plain(v: Any) -> Any:
    """A JSON value for a non-tensor input (numbers, strings, None, lists of them)."""
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if hasattr(v, "item"):  # numpy / torch scalars
        return v.item()
    raise TypeError(f"cannot pass a {type(v).__name__} input to a runner")


class Slots:
    """A runner's slots, and which draw each holds."""

    def __init__(self, draws: Mapping[str, list[Any]], per_draw: bool, folder: Path | None,
                 device: torch.device, hidden: Collection[str] = (), min_slots: int = 1) -> None:
        """`hidden` draws get no slot of their own: `slot_for` copies them into a slot (already mapped and
        touched by earlier calls) just before their call. The input-cache check's never-seen inputs are
        hidden: mapped from the start, a candidate could find and precompute them (held-out corpus,
        2026-11-24), and their first touch inside a timed call page-faulted (an honest kernel on a 4 MB
        input read 0.3 ms slower there, and was judged `input_cache`). `draws` may make some values only
        when asked (residency.Pristine: `lazy`, `like`)."""
        keys = [k for k in draws if k not in hidden] or list(draws)
        # at least `min_slots` (a timed batch's calls each read a slot of their own: clock.py)
        n = max(len(keys), min_slots) if per_draw else min(2, len(keys))
        self.lazy: Collection[str] = getattr(draws, "lazy", ())
        first = draws.like(keys[0]) if hasattr(draws, "like") else draws[keys[0]]
        self.slots = [Slot(first, folder, device) for _ in range(n)]
        self.pristine = draws
        for s, k in zip(self.slots, keys, strict=False):
            s.fill(k, draws[k], k in self.lazy)

    def encodings(self) -> tuple[dict[str, Any], ...]:
        return tuple(s.encoding for s in self.slots)

    def slot_for(self, key: str, avoid: int | None = None) -> int:
        """A slot holding `key`'s values (filled now if none does)."""
        for i, s in enumerate(self.slots):
            if s.holds == key and i != avoid:
                return i
        i = next(i for i in range(len(self.slots)) if i != avoid) if avoid is not None else 0
        if not self.slots[i].fill(key, self.pristine[key], key in self.lazy):
            raise ValueError(f"draw {key} has other non-tensor inputs")
        return i

    def slots_for(self, keys: list[str], fill: int | None = None) -> list[int]:
        """A slot for each of `keys` (a batch; a key repeated reads the same slot), filled where it does not
        already hold its values; only the first `fill` keys' where given (a gated batch: the judge copies the
        others in between the calls, judge/gated.py)."""
        picked: list[int] = []
        for n, key in enumerate(keys):
            if fill is not None and n >= fill:  # a slot of its own, not filled: no slot holds this key (Gate.gates)
                taken = set(picked) | {i for i, s in enumerate(self.slots) if s.holds in keys}
                picked.append(next(i for i in range(len(self.slots)) if i not in taken))
                continue
            held = [i for i, s in enumerate(self.slots) if s.holds == key]
            if held:
                picked.append(held[0])
                continue
            taken = set(picked) | {i for i, s in enumerate(self.slots) if s.holds in keys}
            i = next(i for i in range(len(self.slots)) if i not in taken)
            if not self.slots[i].fill(key, self.pristine[key], key in self.lazy):
                raise ValueError(f"draw {key} has other non-tensor inputs")
            picked.append(i)
        return picked

    def refill(self, i: int, key: str) -> bool:
        """Put `key`'s values into slot i in place (same buffers, new values)."""
        return self.slots[i].fill(key, self.pristine[key], key in self.lazy)

    def changed(self, i: int) -> int | None:
        s = self.slots[i]
        return s.changed(lambda: self.pristine[s.holds])

    def hide(self) -> None:
        """Their files unnamed, once the runner has mapped them (SharedBuffer.hide)."""
        for s in self.slots:
            s.hide()

    def free(self) -> None:
        for s in self.slots:
            s.free()


def staging_sets(state: ProblemState, n: int, folder: Path | None, device: torch.device) -> list[list[SharedBuffer]]:
    """`n` sets of shared buffers shaped as the problem's outputs: a batch's k-th call stages into set k."""
    return [[SharedBuffer(torch.empty(s.shape, dtype=getattr(torch, s.dtype.removeprefix("torch.")), device="meta"),
                          folder, device) for s in state.specs] for _ in range(max(1, n))]


__all__ = ["Slot", "Slots", "staging_sets"]
