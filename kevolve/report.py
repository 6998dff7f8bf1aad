"""Human-readable output for the CLI (rich)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from kevolve.records import Evaluation, TimingStats


def _ms(t: TimingStats | None) -> str:
    return "—" if t is None else f"{t.median_ms:.4f} ms (IQR {t.iqr_ms:.4f}, n={t.trials})"


def print_evaluation(ev: Evaluation) -> None:
    con = Console()
    style = "green" if ev.ok else "red"
    con.print(f"[bold {style}]{ev.outcome.value}[/]  {ev.reason}")
    table = Table(show_header=False, box=None)
    table.add_row("candidate", _ms(ev.timing))
    table.add_row("eager", _ms(ev.ref_timing))
    table.add_row("torch.compile", _ms(ev.compile_ref_timing))
    if ev.speedup is not None:
        vs_c = f", {ev.speedup_vs_compile:.2f}x vs torch.compile" if ev.speedup_vs_compile else ""
        table.add_row("speedup", f"{ev.speedup:.2f}x vs eager{vs_c}")
    table.add_row("device", ev.device)
    table.add_row("phases", ", ".join(f"{k} {v:.1f}s" for k, v in ev.phase_s.items()))
    con.print(table)
    if ev.profile and ev.profile.kernels:
        kt = Table("kernel", "calls", "device µs", "custom")
        for k in ev.profile.kernels[:12]:
            kt.add_row(k.name[:70], str(k.count), f"{k.device_time_us:.1f}", "yes" if k.custom else "")
        con.print(kt)
    if not ev.ok and ev.log_tail:
        con.print("[dim]" + "\n".join(ev.log_tail.splitlines()[-15:]) + "[/]", highlight=False)
