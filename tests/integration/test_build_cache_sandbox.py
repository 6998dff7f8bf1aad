"""Under bubblewrap the build cache is read-only to candidates; builds reach it through the host.

A C++ (load_inline) candidate builds in its private build directory; the host promotes the build
under the candidate's scope; the same source evaluated again imports it without building; a hostile
candidate that tries to overwrite that module, plant one for another scope or one in the build
service's by-source entries (which only the service writes) changes nothing.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from testpaths import FIXTURES, unavailable


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_builds_are_promoted_reused_and_cannot_be_poisoned(tmp_path, cpu_config) -> None:  # noqa: ANN001
    from kevolve.contract import load_problem
    from kevolve.sandbox.isolate.bwrap import probe
    from kevolve.sandbox.build.cache import build_scope
    from kevolve.sandbox.common.protocol import Progress
    from kevolve.sandbox.parent.local import LocalSandbox

    from kevolve.records import Candidate

    works, why = probe()
    if not works:
        unavailable(why)
    cache, scratch_root = tmp_path / "cache", tmp_path / "scratch"
    scratch_root.mkdir()
    cfg = cpu_config.model_copy(update={"cache_dir": cache, "isolation": "bwrap"})
    box = LocalSandbox(scratch_root=scratch_root, keep_scratch=True)
    prob = load_problem(FIXTURES / "problems" / "relu.py")
    source = (FIXTURES / "solutions" / "relu_cpp.py").read_text()
    scope = build_scope(source)

    phases: list[str] = []  # the judge's phases as they happen (kevolve eval's live line), told to the parent

    def seen(p: Progress) -> None:  # each phase once as it starts (within a phase the judge may report its ETA again)
        if phases[-1:] != [p.phase]:
            phases.append(p.phase)

    box.progress = seen
    first = box.evaluate(prob, Candidate.from_source(source, prob.id), cfg)
    assert first.ok, first.reason
    from kevolve.report import PHASE_WORDS

    assert phases[0] == "reference" and set(phases) <= set(PHASE_WORDS), phases
    assert [p for p in phases if p in ("compile", "correctness", "timing")] == ["compile", "correctness", "timing"]
    box.progress = None
    modules = list((cache / "extensions" / scope).glob("*/*.so"))
    assert len(modules) == 1, "the build was not promoted into the cache under its scope"
    before = _digest(modules[0])

    hostile = (FIXTURES.parent / "adversarial" / "hostile" / "writes_outside_scratch.py").read_text()
    by_source = cache / "extensions" / "by-source"
    by_source.mkdir()
    targets = [str(modules[0]), str(cache / "extensions" / build_scope("another") / "planted.so"),
               str(cache / "extensions" / "planted"), str(by_source / "planted")]
    bad = box.evaluate(prob, Candidate.from_source(hostile.replace("__TARGETS__", repr(targets)), prob.id),
                       cfg.model_copy(update={"allow_torch_only": True, "policy_allow": ("all",)}))
    assert bad.ok, bad.reason
    assert _digest(modules[0]) == before
    assert sorted(p.name for p in (cache / "extensions").iterdir()) == sorted([scope, "by-source"])
    assert not any(by_source.iterdir()), "a candidate wrote into by-source"

    again = box.evaluate(prob, Candidate.from_source(source, prob.id), cfg)
    assert again.ok, again.reason
    private = [d for d in scratch_root.iterdir() if (d / "build" / "extensions" / scope).is_dir()]
    built_twice = [d for d in private if any((d / "build" / "extensions" / scope).iterdir())]
    assert len(built_twice) == 1, "the second evaluation built again instead of importing the cached module"
