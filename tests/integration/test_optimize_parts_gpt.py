"""`kevolve optimize --parts` on a transformer block (issue 34: "the LLM path on a level-3 problem end to end"): the
shape of KernelBench level 3's MiniGPT block (tests/fixtures/problems/gpt_block.py: pre-norm, causal self-attention
whose mask is sliced to the sequence's length, which torch.fx cannot trace, a GELU MLP) split into its norms, its
attention and its MLP; each part prompted alone through the real openai SDK against the local fake server, which
answers the attention and the MLP with C++ (tests/fixtures/solutions/parts/gpt_cpp.py) and the norms with nothing
usable; the composition judged as the whole block by the real evaluator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fake_llm_server import FakeLLMServer
from testpaths import BUILD_CACHE, FIXTURES, OPTIMIZE_EXIT

CPP = (FIXTURES / "solutions" / "parts" / "gpt_cpp.py").read_text()
# what only each part's problem holds (its constructor call in the part's own docstring)
ATTN, MLP, NORMS = "CausalSelfAttention(32, 4, 16)", "MLP(32)", "LayerNorm"


def reply(part: str) -> str:
    source = CPP.replace('PART = "attn"', f'PART = "{part}"')
    return f"Here is the part, faster.\n\n```python\n{source}```\n"


def test_a_transformer_block_in_parts_prompts_attention_and_mlp_alone_and_judges_the_whole(tmp_path: Path) -> None:
    problem = FIXTURES / "problems" / "gpt_block.py"
    server = FakeLLMServer(rules=[(ATTN, [reply("attn")]), (MLP, [reply("mlp")])]).start()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC"))}
        env.update(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=server.openai_url, KEVOLVE_CACHE_DIR=str(BUILD_CACHE))
        p = subprocess.run([sys.executable, "-m", "kevolve.cli", "optimize", str(problem), "--parts", "--llm",
                            "openai:gpt-4o", "--islands", "1", "--jobs-per-generation", "1", "--max-candidates", "3",
                            "--seed", "5", "--timeout", "400", "--max-timing-s", "2", "--trials", "10", "--device", "cpu",
                            "--no-archive", "--runs-dir",
                            str(tmp_path / "runs"), "--llm-cache", str(tmp_path / "llm"), "--json", "--quiet"],
                           env=env, capture_output=True, text=True, timeout=1200)
    finally:
        server.stop()
    result = json.loads(p.stdout)
    assert p.returncode == OPTIMIZE_EXIT[result["answer"]], p.stderr[-3000:]
    parts = {s["index"]: s for s in result["parts"]}
    assert [parts[i]["paths"] for i in sorted(parts)] == [["ln_1", "ln_2"], ["attn"], ["mlp"]]
    prompts = [s.prompt for s in server.seen]
    assert any(ATTN in q for q in prompts) and any(MLP in q for q in prompts), [q[:200] for q in prompts]
    for q in prompts:  # one part alone in each prompt: never the block's forward or another part
        assert sum(m in q for m in (ATTN, MLP, f"{NORMS}(32)")) == 1, q[:400]
        assert "self.ln_1(x)" not in q and "self.mlp(self.ln_2(x))" not in q
    assert parts[2]["candidate_id"] and parts[3]["candidate_id"]  # both C++ parts verified on their own problems
    run = Path(result["run_dir"])
    verdict = json.loads((run / "candidates" / f"{result['best_candidate_id']}.json").read_text())["evaluation"]
    assert verdict["outcome"] == "ok", verdict["reason"]  # the whole block, judged as the whole
    assert result["eager_ms"] == verdict["ref_timing"]["median_ms"]
    best = (run / "best_model.py").read_text()
    assert "class ModelNew(Model)" in best and "causal_softmax" in best and "gelu_tanh" in best
    assert "Composition as the whole model: **ok**" in (run / "report.md").read_text()
