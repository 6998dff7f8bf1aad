"""Render the prompt files in `prompts/` and describe evaluations for them.

Prompts are `$name` templates (string.Template), so the C++ and CUDA braces in sources need no
escaping. A missing field is a bug: rendering raises.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path
from string import Template

from kevolve.agent.state import Example
from kevolve.records import Evaluation, Outcome

PROMPTS = Path(__file__).parent / "prompts"
OPERATORS = ("translate", "repair", "mutate", "crossover")


TARGETS = ("target_cpu", "target_gpu", "target_cuda", "target_cupy", "target_triton")
NAMES = ("system", *OPERATORS, *TARGETS)


class PromptError(ValueError):
    """A prompt folder (--prompts DIR) is unusable; the message is one line for the user."""


@cache
def _template(name: str) -> Template:
    return Template((PROMPTS / f"{name}.md").read_text())


class Prompts:
    """The prompt files: the package's defaults, each replaceable by a same-named file in `folder`
    (`--prompts DIR`; files it lacks keep their defaults). An override is checked once, when loaded:
    it may use only the `$fields` its default uses."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder
        self.templates = {name: _template(name) for name in NAMES}
        if folder is not None:
            self.templates.update(_overrides(Path(folder)))

    def render(self, name: str, **fields: str) -> str:
        """The prompt `name` with every `$field` filled in (a missing field is a bug: KeyError)."""
        return self.templates[name].substitute(fields).rstrip() + "\n"


def _overrides(folder: Path) -> dict[str, Template]:
    if not folder.is_dir():
        raise PromptError(f"--prompts {folder}: no such folder")
    out = {}
    for path in sorted(folder.glob("*.md")):
        if path.stem not in NAMES:
            raise PromptError(f"--prompts {path}: not a prompt name (expected {', '.join(f'{n}.md' for n in NAMES)})")
        try:
            t = Template(path.read_text())
        except (OSError, UnicodeDecodeError) as e:
            raise PromptError(f"--prompts {path}: cannot read: {e}") from None
        known = set(_template(path.stem).get_identifiers())
        unknown = sorted(set(t.get_identifiers()) - known)
        if not t.is_valid() or unknown:
            what = f"${unknown[0]} is not filled in" if unknown else "a '$' that is not a $field (write $$ for $)"
            raise PromptError(f"--prompts {path}: {what} (its fields: {', '.join('$' + k for k in sorted(known)) or 'none'})")
        out[path.stem] = t
    return out


DEFAULT_PROMPTS = Prompts()


def render_prompt(name: str, **fields: str) -> str:
    """The default prompt file `name` with every `$field` filled in."""
    return DEFAULT_PROMPTS.render(name, **fields)


def device_notes(device: str, language: str | None = None, prompts: Prompts | None = None) -> str:
    """What kind of kernel the target accepts (prompts/target_*.md), in the kernel language asked for.

    language None on a GPU: CuPy preferred, because NVRTC compiles a CuPy kernel in 0.1-0.3 s while a
    new load_inline extension costs ~12 s even with kevolve's build recipe (65-105 s with torch's own):
    every candidate of a search is then cheaper to judge (H100 measurements in docs/BENCHMARKS.md).
    """
    if not device.startswith("cuda"):
        name = "cpu"
    else:
        name = "gpu" if language is None else str(language)
    return (prompts or DEFAULT_PROMPTS).render(f"target_{name}").rstrip()


def examples_block(examples: Sequence[Example | str]) -> str:
    """Verified solutions of similar problems, from the archive, each with what it achieved and how."""
    if not examples:
        return ""
    parts = ["\n## Verified solutions of similar problems (for ideas)\n"]
    for i, ex in enumerate(examples, 1):
        ex = Example(source=ex) if isinstance(ex, str) else ex  # a checkpoint written before examples were typed
        parts.append(f"Example {i}{_example_facts(ex)}:\n```python\n{ex.source.strip()}\n```\n")
    return "\n".join(parts)


def _example_facts(ex: Example) -> str:
    facts = [ex.problem_name,
             f"{ex.speedup:.2f}x faster than PyTorch eager" if ex.speedup else "",
             f"on {ex.device}" if ex.device else "",
             f"techniques: {', '.join(ex.techniques)}" if ex.techniques else ""]
    facts = [f for f in facts if f]
    return f" ({'; '.join(facts)})" if facts else ""


def describe_failure(ev: Evaluation) -> str:
    """Why a candidate failed, in the words the repair prompt needs: the compiler's log for a build
    error, where and by how much the outputs differ for a wrong result."""
    lines = [f"Reason: {ev.reason}"]
    failed = [c for c in ev.checks if not c.passed]
    if failed:
        lines.append("Failed checks:")
        lines += [f"- {c.name}: {c.detail}" for c in failed[:6]]
    if ev.outcome in (Outcome.COMPILE_ERROR, Outcome.RUNTIME_ERROR, Outcome.CRASHED) and ev.candidate_log.strip():
        tail = "\n".join(ev.candidate_log.strip().splitlines()[-40:])
        label = "Compiler output" if ev.outcome is Outcome.COMPILE_ERROR else "Output"
        lines.append(f"{label} (last lines):\n```\n{tail}\n```")
    return "\n".join(lines)


def describe_performance(ev: Evaluation) -> str:
    """Timing, speedups and the profile: what an evolution prompt should optimize against."""
    t, r, c = ev.timing, ev.ref_timing, ev.compile_ref_timing
    lines = []
    if t is not None:
        lines.append(f"- this implementation: {t.median_ms:.4f} ms median (IQR {t.iqr_ms:.4f}, {t.trials} trials)")
    if r is not None:
        sp = f" -> speedup {ev.speedup:.2f}x" if ev.speedup else ""
        lines.append(f"- PyTorch eager: {r.median_ms:.4f} ms{sp}")
    if c is not None:
        sp = f" -> speedup {ev.speedup_vs_compile:.2f}x" if ev.speedup_vs_compile else ""
        lines.append(f"- torch.compile: {c.median_ms:.4f} ms{sp}")
    p = ev.profile
    if p is not None and p.kernels:
        lines.append("- kernels per forward (name, launches, device time):")
        lines += [f"  - {k.name[:80]}: {k.count}x, {k.device_time_us:.1f} us{' (yours)' if k.custom else ''}"
                  for k in p.kernels[:8]]
    if p is not None and p.ncu:
        lines.append("- Nsight Compute: " + ", ".join(f"{k}={v:.3g}" for k, v in sorted(p.ncu.items())[:10]))
    if p is not None and (p.achieved_gbps or p.achieved_tflops):
        got = [f"{p.achieved_gbps:.1f} GB/s" if p.achieved_gbps else "",
               f"{p.achieved_tflops:.2f} TFLOP/s" if p.achieved_tflops else ""]
        lines.append("- achieved: " + ", ".join(g for g in got if g))
    if p is not None and p.roofline_fraction is not None:
        lines.append(f"- roofline fraction: {p.roofline_fraction:.0%} of the nearer measured roof (memory or compute)")
    return "\n".join(lines) or "- no timing recorded"
