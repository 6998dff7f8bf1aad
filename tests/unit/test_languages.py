"""A kernel language is one entry in kevolve/languages.py: every reader (the policy, the judge's custom-kernel
check, isolation, the container, the image, the runner, the archive, the extractor, --language, doctor, install
hints) sees a new entry without any other change. Run in a fresh interpreter whose registry gains a made-up
language before anything reads it."""

from __future__ import annotations

import json
import subprocess
import sys

from kevolve.languages import LANGUAGES, language

_PROBE = r'''
import json
from pathlib import Path
import kevolve.languages as L
L.LANGUAGES["toy"] = L.Language(
    "toy", "a made-up Python DSL", gpu_only=True, modules=("toy_dsl",), submodules={"toy_dsl": "lang"},
    denied_modules={"toy_dsl.knobs": "process_setting"}, members={"toy_dsl.compile": "files"},
    warm=("toy_dsl",), jit_decorators=(("toy_dsl", "kernel"),), kernel_decorators=("toy_dsl.kernel",),
    caches=(("TOY_CACHE_DIR", "toy"),), recognise=(r"import\s+toy_dsl",), fence_tags=("toy",),
    extra="kevolve[toy]", dists=("toy-dsl",))
from kevolve.records import KernelLanguage
from kevolve.agent.settings import parse_language
from kevolve.agent.extract import extract_code
from kevolve.archive.techniques import techniques
from kevolve.extras import install_hint
from kevolve.sandbox.policy.candidate import check_policy
from kevolve.sandbox.policy.source import custom_kernel_names
from kevolve.sandbox.isolate.launch import cache_vars, _cache_dirs
from kevolve.sandbox.isolate import container, docker_image
from kevolve.sandbox.runner.serve import kernel_libraries

ok = ("import torch\nimport toy_dsl\n@toy_dsl.kernel\ndef add_k(x):\n    pass\n"
      "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n")
knobs = ok.replace("import toy_dsl\n", "import toy_dsl\nimport toy_dsl.knobs\n")
compile_call = ok.replace("        return x\n", "        toy_dsl.compile('k')\n        return x\n")
reply = "```toy\n" + ok + "```\n"
v = lambda src: (lambda r: r and r.category)(check_policy(src, frozenset()))
print(json.dumps({
    "enum": KernelLanguage("toy").value, "parsed": str(parse_language("toy", "cuda")),
    "policy_ok": v(ok), "policy_knobs": v(knobs), "policy_compile": v(compile_call),
    "kernels": list(custom_kernel_names(ok)), "tags": list(techniques(ok)),
    "fence": extract_code(reply).source is not None, "hint": install_hint("toy_dsl"),
    "cache": _cache_dirs(Path("/s")).get("TOY_CACHE_DIR"), "container_keeps": "TOY_CACHE_DIR" in container._ENV_KEEP,
    "vars": "TOY_CACHE_DIR" in cache_vars(), "dists": "toy-dsl" in docker_image.GPU_DISTS,
    "warm": "toy_dsl" in kernel_libraries(),
}))
'''


def test_one_registry_entry_reaches_every_reader() -> None:
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got == {
        "enum": "toy", "parsed": "toy", "policy_ok": None, "policy_knobs": "process_setting",
        "policy_compile": "files", "kernels": ["add_k"], "tags": ["toy"], "fence": True,
        "hint": "toy kernels need the Python package 'toy_dsl', which is not installed: pip install 'kevolve[toy]'",
        "cache": "/s/toy", "container_keeps": True, "vars": True, "dists": True, "warm": True,
    }


def test_every_language_has_its_prompt_and_a_known_name() -> None:
    from pathlib import Path

    import kevolve.agent

    prompts = Path(kevolve.agent.__file__).parent / "prompts"
    assert all((prompts / lang.prompt).is_file() for lang in LANGUAGES.values())
    assert language("triton").gpu_only and not language("cuda").gpu_only
    try:
        language("fortran")
    except KeyError as e:
        assert "cuda, cupy, triton" in str(e)
    else:
        raise AssertionError("an unknown language was found")
