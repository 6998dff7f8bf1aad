"""`kevolve optimize --parts` end to end on the CPU: a whole model (the small ResNet at 8 channels) split into parts,
each part's loop prompted on its own (the real openai SDK against the local fake server, which sees one prompt per
part and never the whole model), the parts' C++ candidates judged, composed, and the composition judged as the whole
model by the real evaluator; the candidate budget is the whole run's; the run resumed (`--parts --resume`) keeps the
loops that ended and judges the composition again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fake_llm_server import FakeLLMServer
from testpaths import BUILD_CACHE, FIXTURES, OPTIMIZE_EXIT

PARTS = FIXTURES / "solutions" / "parts"
# what only each part's problem holds (its constructor call), and the C++ candidate the server answers it with
MARKERS = {1: ("torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)", "stem_cpp.py"), 2: ("Block(8)", "block_cpp.py"),
           3: ("torch.nn.Linear(8, 10)", "head_cpp.py")}


def reply(name: str) -> str:
    return f"Here is the part, faster.\n\n```python\n{(PARTS / name).read_text()}```\n"


def test_optimize_parts_prompts_each_part_alone_and_judges_the_composition_as_the_whole(tmp_path: Path) -> None:
    src = (FIXTURES / "problems" / "small_resnet.py").read_text()
    problem = tmp_path / "tiny_resnet.py"
    problem.write_text(src.replace("torch.randn(32, 3, 64, 64)", "torch.randn(2, 3, 16, 16)")
                       .replace("return [64, 100]", "return [8, 10]"))
    server = FakeLLMServer(rules=[(m, [reply(f)]) for m, f in MARKERS.values()]).start()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC"))}
        env.update(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=server.openai_url, KEVOLVE_CACHE_DIR=str(BUILD_CACHE))
        common = ["--device", "cpu", "--no-archive", "--runs-dir", str(tmp_path / "runs"), "--llm-cache",
                  str(tmp_path / "llm"), "--json", "--quiet"]
        # two candidates for the whole run: one for each of the two parts with the largest shares (the blocks, and
        # the stem or the head); the third part, if worth a loop, has none
        p = subprocess.run([sys.executable, "-m", "kevolve.cli", "optimize", str(problem), "--parts", "--llm",
                            "openai:gpt-4o", "--islands", "1", "--jobs-per-generation", "1", "--max-candidates", "2",
                            "--seed", "3", "--timeout", "400", "--max-timing-s", "2", "--trials", "10", *common], env=env,
                            capture_output=True, text=True, timeout=1200)
        result = json.loads(p.stdout)
        check_first_run(p, result, server)
        asked = len(server.seen)
        again = subprocess.run([sys.executable, "-m", "kevolve.cli", "optimize", "--parts", "--resume",
                                result["run_id"], *common], env=env, capture_output=True, text=True, timeout=1200)
    finally:
        server.stop()
    resumed = json.loads(again.stdout)
    assert again.returncode == OPTIMIZE_EXIT[resumed["answer"]], again.stderr[-3000:]
    assert len(server.seen) == asked  # every part's loop had ended: kept, none prompted again
    assert resumed["run_id"] == result["run_id"] and resumed["parts"] == result["parts"]
    assert resumed["compositions"][0]["candidate_id"] == result["best_candidate_id"]
    composed = Path(result["run_dir"]) / "candidates" / f"{result['best_candidate_id']}.json"
    assert json.loads(composed.read_text())["evaluation"]["outcome"] == "ok"  # judged again: ok again


def check_first_run(p: subprocess.CompletedProcess, result: dict, server: FakeLLMServer) -> None:
    assert p.returncode == OPTIMIZE_EXIT[result["answer"]], p.stderr[-3000:]
    parts = {s["index"]: s for s in result["parts"]}
    prompted = {i for i, s in parts.items() if s["run_id"]}
    assert 2 in prompted and prompted <= {1, 2, 3}  # the blocks (most of the time) at least; a part under 1% has none
    prompts = [s.prompt for s in server.seen]
    # one translation per part: identical blocks are one problem (a part whose stem fell under 1% of eager's time on
    # a busy machine leaves the whole run's two candidates to the blocks: a mutation prompt of the blocks follows)
    translations = [q for q in prompts if q.startswith("Task: translate")]
    assert len(translations) == len(prompted) and len(prompts) <= 2
    assert sorted(next(i for i, (m, _) in MARKERS.items() if m in q) for q in translations) == sorted(prompted)
    assert {next(i for i, (m, _) in MARKERS.items() if m in q) for q in prompts} == prompted
    for q in prompts:  # a part's prompt shows that part alone, never the whole model's forward or its other parts
        assert sum(m in q for m, _ in MARKERS.values()) == 1
        assert "adaptive_avg_pool2d" not in q and "self.blocks" not in q
    assert parts[2]["paths"] == ["blocks.0", "blocks.1"] and parts[2]["candidate_id"]
    run = Path(result["run_dir"])
    composed = (run / "candidates" / f"{result['best_candidate_id']}.json")
    verdict = json.loads(composed.read_text())["evaluation"]
    assert verdict["outcome"] == "ok" and result["eager_ms"] == verdict["ref_timing"]["median_ms"]  # the whole's eager
    assert verdict["audit"] is not None  # measured again, as a winner is
    assert "blocks.0" in (run / "best_model.py").read_text() and "class ModelNew(Model)" in (run / "best_model.py").read_text()
    report = (run / "report.md").read_text()
    assert "Composition as the whole model: **ok**" in report and "| 2 | blocks.0, blocks.1 | `Block(8)` |" in report
    assert result["proposals"] <= 2 and len(prompted) <= 2  # the whole run's two candidates


def test_ctrl_c_in_a_parts_run_then_resume_spends_the_rest_of_its_budget(tmp_path: Path) -> None:
    """A real SIGINT while a part's loop waits on the LLM: exit 130 with the --parts --resume line, the part's loop
    journalled as not ended; the resumed run goes on in the same folders and spends the rest of the whole run's
    candidates, no LLM request made twice. Every reply is a distinct candidate the policy rejects before anything
    runs (it imports subprocess): no extension is built."""
    import signal

    from test_optimize_resume import SignallingServer, optimize

    src = (FIXTURES / "problems" / "small_resnet.py").read_text()
    problem = tmp_path / "tiny_resnet.py"
    problem.write_text(src.replace("torch.randn(32, 3, 64, 64)", "torch.randn(2, 3, 16, 16)")
                       .replace("return [64, 100]", "return [8, 10]"))
    rejected = [f"```python\nimport subprocess\nimport torch\nK = {i}\n\nclass ModelNew(torch.nn.Module):\n"
                f"    def forward(self, x):\n        return x * K\n```\n" for i in range(40)]
    server = SignallingServer(rules=[(m, rejected) for m, _ in MARKERS.values()]).start()
    runs = tmp_path / "runs"
    common = ["--runs-dir", str(runs), "--llm-cache", str(tmp_path / "llm")]
    try:
        first = optimize([str(problem), "--parts", "--llm", "openai:gpt-4o", "--device", "cpu", "--no-archive",
                          "--islands", "1", "--jobs-per-generation", "1", "--max-candidates", "6", "--seed", "3",
                          "--timeout", "400", *common], server.openai_url)
        server.pid, server.at, server.signum = first.pid, 2, signal.SIGINT  # in the first part's loop
        _, err1 = first.communicate(timeout=900)
        assert first.returncode == 130, err1[-3000:]
        (run,) = [p for p in runs.iterdir() if (p / "parts.json").is_file()]
        assert err1.strip().splitlines()[-1].endswith(f"continue with: kevolve optimize --parts --resume {run.name}")
        assert "Traceback" not in err1 and not (run / "result.json").exists()
        journal = json.loads((run / "part_runs.json").read_text())["runs"]
        assert journal and not journal[-1]["ended"]
        asked = len([s for s in server.seen if s.status == 200])
        second = optimize(["--parts", "--resume", run.name, "--json", *common], server.openai_url)
        out, err2 = second.communicate(timeout=900)
    finally:
        server.stop()
    assert "Traceback" not in err2, err2[-3000:]
    result = json.loads(out)
    assert result["run_id"] == run.name and result["proposals"] == 6 and result["outcomes"] == {"rejected": 6}
    again = {j["index"]: j for j in json.loads((run / "part_runs.json").read_text())["runs"]}
    stopped = journal[-1]
    assert again[stopped["index"]]["run_id"] == stopped["run_id"]  # gone on with in the same folder
    assert all(j["ended"] for j in again.values())
    assert asked >= 1 and len([s for s in server.seen if s.status == 200]) == 6  # none asked twice
