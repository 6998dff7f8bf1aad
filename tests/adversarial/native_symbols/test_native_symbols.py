"""The third red team's native wrappers (2026-11-27, "H2"): file reads and threads through APIs the text scan does not
name. Each candidate here passes the candidate policy whole (the text scan included), so what refuses it is the
symbol check of its built module (sandbox/build/symbols.py), in the runner, before the module is loaded: the same
verdict with and without bubblewrap, and again when the module comes from the cache (the second evaluation of a
source loads the build the first one promoted)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kevolve.sandbox.policy.candidate import check_policy

from kevolve.records import Outcome

HERE = Path(__file__).parent
# candidate -> (the capability the refusal names, the import it names)
HACKS = {
    "reads_file_through_wifstream": ("files", "basic_ifstream<wchar_t"),
    "reads_file_through_wfilebuf": ("files", "basic_filebuf<wchar_t"),
    "reads_file_through_basic_file": ("files", "__basic_file<char>"),
    "reads_fd_through_stdio_filebuf": ("files", "basic_filebuf<char"),
    "reads_file_through_torch_from_file": ("files", "from_file"),
    "starts_thread_through_gthread": ("threads", "pthread_create"),
    "starts_thread_through_c10_pool": ("threads", "ThreadPool"),
}


def test_every_candidate_here_is_listed_and_documented() -> None:
    assert {p.stem for p in HERE.glob("*.py") if not p.name.startswith("test_")} == set(HACKS)
    for name in HACKS:
        text = (HERE / f"{name}.py").read_text()
        assert text.startswith('"""Hack') and "Expected" in text, name


@pytest.mark.parametrize("hack", sorted(HACKS))
def test_the_text_scan_alone_lets_each_wrapper_through(hack: str) -> None:
    assert check_policy((HERE / f"{hack}.py").read_text()) is None


@pytest.mark.parametrize("isolation", ["auto", "none"])
@pytest.mark.parametrize("hack", sorted(HACKS))
def test_the_built_module_is_refused_by_what_it_imports(evaluate, hack: str, isolation: str) -> None:  # noqa: ANN001
    what, symbol = HACKS[hack]
    ev = evaluate("relu", HERE / f"{hack}.py", isolation=isolation, policy_allow=())  # the default policy
    assert (ev.outcome, ev.reason_code) == (Outcome.REJECTED, "policy_native"), ev.reason
    assert "symbol check" in ev.reason and f"({what})" in ev.reason and symbol in ev.reason, ev.reason
    assert "\n" not in ev.reason and ev.speedup is None


def test_with_native_code_allowed_the_check_stands_aside(evaluate) -> None:  # noqa: ANN001
    # --allow native waives the text scan and the symbol check alike: the module loads, and what it does is left to
    # the rest of the evaluator (here its from_file read of /etc/hostname succeeds or fails at run time)
    ev = evaluate("relu", HERE / "reads_file_through_torch_from_file.py", policy_allow=("native",))
    assert "symbol check" not in ev.reason, ev.reason
