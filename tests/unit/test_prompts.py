"""Prompt snapshots: each operator's rendered prompt, from fixed parents and verdicts.

After an intended prompt change, regenerate with KEVOLVE_UPDATE_SNAPSHOTS=1 and review the diff.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kevolve.agent.nodes.propose import build_messages
from kevolve.agent.nodes.retrieve import as_example
from kevolve.agent.prompting import PromptError, Prompts, render_prompt
from kevolve.archive.records import ArchivedKernel
from kevolve.agent.state import Job, Trial
from kevolve.contract import problem_from_source
from kevolve.records import (Candidate, CheckResult, Evaluation, KernelLaunch, Origin, Outcome, Profile,
                             TimingStats)
from kevolve.sandbox.parent.ncu import parse_csv, summarize
from kevolve.sandbox.judge.roofline import annotate

SNAP = Path(__file__).parent / "snapshots"
PROBLEM = problem_from_source("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                              "        return torch.relu(x)\ndef get_inputs():\n    return [torch.randn(64)]\n"
                              "def get_init_inputs():\n    return []\n", "relu.py")
SRC = 'import torch\n_src = r"""__global__ void relu_k(float* y) { y[0] = 0; }"""\nclass ModelNew(torch.nn.Module):\n    pass\n'


def t(ms: float) -> TimingStats:
    return TimingStats(median_ms=ms, mean_ms=ms, min_ms=ms, max_ms=ms, iqr_ms=0.01, trials=30, method="cuda_events")


def trial(outcome: Outcome, reason: str, **ev: object) -> Trial:
    cand = Candidate.from_source(SRC, PROBLEM.id)
    e = Evaluation(candidate_id=cand.id, problem_id=PROBLEM.id, outcome=outcome, reason=reason, **ev)  # type: ignore[arg-type]
    return Trial(job=Job(id="g0-j0", operator=Origin.TRANSLATE, island=0, generation=0), status="evaluated",
                 candidate=cand, evaluation=e)


COMPILE = trial(Outcome.COMPILE_ERROR, "compile_error: build failed",
                log_tail="[1/2] nvcc relu.cu\nrelu.cu(3): error: expected a \";\"\n1 error detected")
WRONG = trial(Outcome.INCORRECT, "incorrect: draw d0: output 0: max error 5.2e-01, rms 4.9e-01",
              checks=(CheckResult(name="correct:d0", passed=False, detail="output 0: max error 5.2e-01"),))
# Nsight Compute's CSV for the candidate's kernel, as sandbox/parent/ncu.py reads it.
NCU_CSV = '''"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1","python3","h","relu_k","1","7","(256, 1, 1)","(64, 1, 1)","0","9.0","m","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","61.2"
"0","1","python3","h","relu_k","1","7","(256, 1, 1)","(64, 1, 1)","0","9.0","m","gpu__time_duration.sum","usecond","41.5"
"0","1","python3","h","relu_k","1","7","(256, 1, 1)","(64, 1, 1)","0","9.0","m","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","12.0"
'''
# The profile as the verdict builds it (sandbox/judge/verdict.py: roofline.annotate, then ncu.attach's metrics):
# 88.45 MB in 0.05 ms is 1769 GB/s, 61% of the H100's measured 2900 GB/s.
PROFILE = annotate(Profile(kernels=(KernelLaunch(name="relu_k", count=1, device_time_us=41.5, custom=True),),
                           ncu=summarize(parse_csv(NCU_CSV))),
                   median_ms=0.05, min_bytes=88_450_000, flops=None, device_name="NVIDIA H100 80GB HBM3")
FAST = trial(Outcome.OK, "ok", timing=t(0.05), ref_timing=t(0.1), compile_ref_timing=t(0.08), profile=PROFILE,
             device="NVIDIA H100 80GB HBM3")
# An archive hit as `kevolve.archive.retrieve` returns it (the store's own record of a stored kernel).
EXAMPLE = ArchivedKernel(id="e1", problem_id="p1", problem_name="20_LeakyReLU", op_name="LeakyReLU", level=1,
                         task_id=20, kernel_name="leaky", outcome="ok", speedup=3.25, speedup_compile=1.5,
                         runtime_ms=0.04, ref_runtime_ms=0.13, compile_ref_runtime_ms=0.06,
                         device="NVIDIA H100 80GB HBM3", techniques=("vectorized_loads", "grid_stride"),
                         origin="mutate", proposer="openai:gpt-4o", created_at=datetime(2026, 11, 1, tzinfo=UTC),
                         source="class ModelNew: 'archive example'")

TRITON_COMPILE = trial(Outcome.COMPILE_ERROR, "compile_error: CompilationError: at 7:8: ... (first launch)",
                       log_tail="at 7:8:\n    x = tl.load(x_ptr + offs)\n        ^\nValueError: Mask argument "
                                "cannot be block type if pointer argument is not a block")
CASES = {
    "translate": (Origin.TRANSLATE, [], [as_example(EXAMPLE)], None),
    "repair_compile": (Origin.REPAIR, [COMPILE], [], None),
    "repair_wrong": (Origin.REPAIR, [WRONG], [], None),
    "mutate": (Origin.MUTATE, [FAST], [], None),
    "crossover": (Origin.CROSSOVER, [FAST, FAST], [], None),
    "translate_triton": (Origin.TRANSLATE, [], [], "triton"),
    "repair_compile_triton": (Origin.REPAIR, [TRITON_COMPILE], [], "triton"),
    "mutate_cupy": (Origin.MUTATE, [FAST], [], "cupy"),
    "translate_cuda": (Origin.TRANSLATE, [], [], "cuda"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_prompt_snapshot(case: str) -> None:
    op, parents, examples, language = CASES[case]
    job = Job(id="g1-j0", operator=op, island=0, generation=1)
    msgs = build_messages(job, PROBLEM, parents, examples, "cuda", language)
    text = f"=== system ===\n{msgs[0].content}=== user ===\n{msgs[1].content}"
    path = SNAP / f"prompt_{case}.txt"
    if os.environ.get("KEVOLVE_UPDATE_SNAPSHOTS") == "1" or not path.exists():
        path.write_text(text)
    assert text == path.read_text()
    assert msgs[1].content.startswith(f"Task: {op.value}")


def test_repair_prompts_carry_the_compiler_log_and_the_mismatch() -> None:
    job = Job(id="g1-j0", operator=Origin.REPAIR, island=0, generation=1)
    assert 'relu.cu(3): error: expected a ";"' in build_messages(job, PROBLEM, [COMPILE], [], "cuda")[1].content
    assert "max error 5.2e-01" in build_messages(job, PROBLEM, [WRONG], [], "cuda")[1].content


def test_mutate_prompt_carries_the_profile() -> None:
    job = Job(id="g1-j0", operator=Origin.MUTATE, island=0, generation=1)
    text = build_messages(job, PROBLEM, [FAST], [], "cuda")[1].content
    assert "speedup 2.00x" in text and "relu_k: 1x, 41.5 us (yours)" in text and "roofline fraction: 61%" in text
    assert "dram_throughput_pct=61.2" in text and "achieved: 1769.0 GB/s" in text
    assert "torch.compile: 0.0800 ms -> speedup 1.60x" in text


def test_missing_field_is_an_error() -> None:
    with pytest.raises(KeyError):
        render_prompt("repair", problem_source="x")


def test_language_decides_what_the_target_section_asks_for() -> None:
    job = Job(id="g1-j0", operator=Origin.TRANSLATE, island=0, generation=1)
    text = {lang: build_messages(job, PROBLEM, [], [], "cuda", lang)[1].content for lang in ("cuda", "cupy", "triton")}
    assert "@triton.jit" in text["triton"] and "RawKernel" not in text["triton"] and "load_inline" not in text["triton"]
    assert "RawKernel" in text["cupy"] and "@triton.jit" not in text["cupy"]
    assert "load_inline" in text["cuda"] and "RawKernel" not in text["cuda"] and "@triton.jit" not in text["cuda"]
    cpu = build_messages(job, PROBLEM, [], [], "cpu", None)[1].content
    assert "The CPU" in cpu and "Triton" not in cpu


def test_translate_prompt_shows_each_examples_speedup_techniques_and_hardware() -> None:
    job = Job(id="g0-j0", operator=Origin.TRANSLATE, island=0, generation=0)
    text = build_messages(job, PROBLEM, [], [as_example(EXAMPLE), "class ModelNew: 'bare'"], "cuda")[1].content
    assert ("Example 1 (20_LeakyReLU; 3.25x faster than PyTorch eager; on NVIDIA H100 80GB HBM3; "
            "techniques: vectorized_loads, grid_stride):") in text
    assert "Example 2:\n```python\nclass ModelNew: 'bare'" in text  # a checkpoint from before examples were typed


def test_a_prompt_folder_replaces_only_the_files_it_has(tmp_path: Path) -> None:
    (tmp_path / "mutate.md").write_text("Task: mutate\nMake it faster.\n$candidate_source\n$performance\n")
    prompts = Prompts(tmp_path)
    job = Job(id="g1-j0", operator=Origin.MUTATE, island=0, generation=1)
    msgs = build_messages(job, PROBLEM, [FAST], [], "cuda", prompts=prompts)
    assert msgs[1].content.startswith("Task: mutate\nMake it faster.\nimport torch") and "roofline fraction" in msgs[1].content
    assert msgs[0].content == render_prompt("system")  # no system.md in the folder: the default


@pytest.mark.parametrize("name, text, why", [
    ("mutate.md", "Task: mutate $candidate_source $speedup_target", r"\$speedup_target is not filled in"),
    ("mutate.md", "costs 5$ a call", "not a \\$field"),
    ("evolve.md", "anything", "not a prompt name"),
])
def test_a_bad_prompt_folder_is_a_one_line_error(tmp_path: Path, name: str, text: str, why: str) -> None:
    (tmp_path / name).write_text(text)
    with pytest.raises(PromptError, match=why) as e:
        Prompts(tmp_path)
    assert "\n" not in str(e.value)
    with pytest.raises(PromptError, match="no such folder"):
        Prompts(tmp_path / "missing")


def test_a_crashed_candidates_repair_prompt_carries_its_output_without_the_harness_profiler_lines() -> None:
    """Every runner warms the profiler up as it starts, and libkineto logs that into the runner's output, which a
    crash's log_tail ends with: the repair prompt gets the candidate's lines only (issue 37, defect 5's profiler
    line). The harness lines here are what the runner's own warm-up writes, run in a child process."""
    import subprocess
    import sys

    warm = subprocess.run([sys.executable, "-c", "import torch; from kevolve.sandbox.common.profile import warm_up; "
                           "warm_up(torch.device('cpu'))"], capture_output=True, text=True, timeout=300)
    harness = warm.stdout + warm.stderr
    assert warm.returncode == 0 and "profiler_stop" in harness, harness
    mine = "Fatal Python error: Segmentation fault\n  File \"kevolve_candidate.py\", line 9 in forward"
    crashed = trial(Outcome.CRASHED, "crashed: runner exit -11", log_tail=mine + "\n" + harness)
    job = Job(id="g1-j0", operator=Origin.REPAIR, island=0, generation=1)
    prompt = build_messages(job, PROBLEM, [crashed], [], "cuda")[1].content
    assert mine in prompt and "profiler_st" not in prompt and "USDT" not in prompt
    assert crashed.evaluation.candidate_log == mine
