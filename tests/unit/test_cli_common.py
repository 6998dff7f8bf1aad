"""The helpers every `kevolve` command shares: one-line failures, the --device check, bad flags."""

from __future__ import annotations

import pytest
import typer

from kevolve.cli_common import NO_GPU, device_problem, fail, ingest_mode, or_fail, parse_allow


def test_fail_prints_one_error_line_and_exits_with_the_code(capsys) -> None:
    with pytest.raises(typer.Exit) as e:
        fail("no such file", code=3)
    assert e.value.exit_code == 3 and capsys.readouterr().err == "error: no such file\n"


@pytest.mark.parametrize("dev", ["nvidia", "cuda:", "cuda:x", "cuda0", "CPU", ""])
def test_device_names_other_than_cuda_cuda_n_and_cpu_are_refused(dev: str) -> None:
    assert device_problem(dev) == f"--device must be cuda, cuda:N or cpu, not {dev!r}"


def test_cpu_is_always_usable() -> None:
    assert device_problem("cpu") is None


def test_cuda_without_a_gpu_says_what_works_instead() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    assert device_problem("cuda:1") == f"--device cuda:1: {NO_GPU}"


def test_a_bad_flag_value_ends_in_one_line_and_a_good_one_is_returned(capsys) -> None:
    assert or_fail(parse_allow, ["threads", "threads", "files"]) == ("threads", "files")
    with pytest.raises(typer.Exit) as e:
        or_fail(ingest_mode, "sometimes", False)
    assert e.value.exit_code == 2 and capsys.readouterr().err.startswith("error: ")


def test_gpus_are_read_one_way_for_optimize_and_bench() -> None:
    """kevolve/cli_common.gpu_indices serves both commands' --gpus (one line each, as ValueError)."""
    import pytest

    from kevolve.cli_common import gpu_indices

    assert gpu_indices("1, 0", visible=False) == (1, 0)
    for bad, says in (("a", "GPU indices like 0,1"), ("0,0", "distinct"), ("", "distinct"), ("-1", "distinct")):
        with pytest.raises(ValueError, match=says):
            gpu_indices(bad, visible=False)
    with pytest.raises(ValueError, match=r"--gpus 0,7: this machine has \d+ GPU"):
        gpu_indices("0,7")  # none here; on a GPU machine fewer than eight
