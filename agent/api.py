"""`kevolve.optimize(...)`: the Python API of the optimizer (an entry point, like the CLI)."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kevolve.agent.config import LLMConfig
from kevolve.agent.llm.base import LLM
from kevolve.agent.result import Result
from kevolve.records import Answer
from kevolve.sandbox import Sandbox

log = logging.getLogger(__name__)


def optimize(target: str | Path | Any, *, llm: str | LLM = "openai:gpt-4o", inputs: Sequence[Any] | None = None,
             init: Sequence[Any] | str | None = None, device: str | None = None, max_candidates: int | None = None,
             budget_usd: float | None = None, time_limit_s: float | None = None, target_speedup: float | None = None,
             budget_tokens: int | None = None, budget_device_s: float | None = None,
             runs_dir: str | Path = "runs", resume: str | None = None, base_url: str | None = None,
             archive: bool = True, archive_ingest: str | None = None, llm_cache: bool = True,
             sandbox: Sandbox | None = None,
             env: Mapping[str, str] | None = None, evolution: Mapping[str, object] | None = None,
             sandbox_options: Mapping[str, object] | None = None, prompts: str | Path | None = None,
             offline: bool = False, language: str | None = None, parts: bool = False) -> Result:
    """Optimize a module and return the Result: its `load_model_class()` gives the drop-in ModelNew when the run
    found a correct kernel faster than eager (`result.answer` is 'improved'); otherwise it gives the original
    `Model` back, and this function logs a warning saying so ('nothing beat eager (best 0.23x): keep your module').

    `target` is a KernelBench file, 'path.py:ClassName', 'package.module:ClassName' (with `inputs` as
    spec strings such as 'float32[32,1024]'), or an nn.Module instance / class (with `inputs` as example
    tensors and `init` the constructor's arguments). `llm` is 'PROVIDER:MODEL' or any object with
    `complete(messages, **opts)`; keys come from `env` (default: the process environment). `archive_ingest`
    is 'all', 'winners' or 'none' (default: 'all', or 'none' with `archive=False`), as `--archive-ingest`.
    `prompts` is a folder of prompt files replacing the built-in ones, as `--prompts`; `offline` proposes with
    the offline generator instead of an LLM (CUDA only), as `--offline`. `language` is the kernel language
    the LLM is asked for: 'cuda' (load_inline), 'cupy' or 'triton' (GPU only), as `--language`; None lets
    the target choose. `budget_tokens` and `budget_device_s` are hard limits on the LLM's tokens and on the
    evaluations' device time, as `--budget-tokens` and `--budget-device`. `parts` optimizes a whole model part by
    part and judges the composition as the whole model, as `--parts` (docs/optimize.md; with `resume`, a --parts run). A bad
    value raises SettingsError (a ValueError) with the CLI's one-line message.
    """
    from kevolve.agent.inputs import load_target, problem_from_module
    from kevolve.agent.run import run_optimize
    from kevolve.agent.settings import build_config

    env = os.environ if env is None else env
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    spec = llm if isinstance(llm, str) else LLMConfig(provider="injected", model=getattr(llm, "name", "custom"))
    config = build_config(llm=spec, offline=offline, base_url=base_url, env=env, device=device, language=language,
                          runs_dir=Path(runs_dir),
                          llm_cache=llm_cache, archive=archive, archive_ingest=archive_ingest, sandbox=sandbox_options,
                          stop=dict(max_candidates=max_candidates, budget_usd=budget_usd, time_limit_s=time_limit_s,
                                    target_speedup=target_speedup, budget_tokens=budget_tokens,
                                    budget_device_s=budget_device_s), evolution=evolution,
                          prompts_dir=None if prompts is None else Path(prompts))
    problem = None
    if resume is None:
        if isinstance(target, (str, Path)):
            init_text = init if isinstance(init, str) or init is None else ", ".join(repr(a) for a in init)
            problem = load_target(str(target), init_text, [str(s) for s in inputs or ()])
        else:
            problem = problem_from_module(target, inputs or (), [] if init is None or isinstance(init, str) else init)
    cache_dir = config.llm.cache_dir if config.llm is not None else None
    wrapped = llm if isinstance(llm, str) or cache_dir is None else _cached(llm, cache_dir)
    injected = None if isinstance(wrapped, str) else wrapped
    if parts:
        from kevolve.agent.parts import run_parts

        result = run_parts(problem, config, llm=injected, sandbox=sandbox, resume=resume)
    else:
        result = run_optimize(problem, config, llm=injected, sandbox=sandbox, resume=resume)
    if result.answer is not Answer.IMPROVED:
        log.warning("kevolve.optimize, run %s: %s (result.load_model_class() returns the original Model)",
                    result.run_id, result.message)
    return result


def _cached(llm: LLM, cache_dir: Path) -> LLM:
    from kevolve.agent.llm.cache import CachedLLM

    return CachedLLM(llm, cache_dir)
