"""The shared build cache: a candidate's builds reach it only through the host, under its own scope."""

from __future__ import annotations

import os
from pathlib import Path

from kevolve.sandbox.build.cache import build_scope, promote


def _built(root: Path, scope: str, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / "extensions" / scope / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def test_promote_copies_only_the_candidates_own_scope(tmp_path) -> None:  # noqa: ANN001
    scope, other = build_scope("candidate A"), build_scope("candidate B")
    built = _built(tmp_path / "build", scope, {"ext_1/ext_1.so": "A's module", "ext_1/build.ninja": "x"})
    _built(built, other, {"ext_2/ext_2.so": "planted for B"})  # a candidate writing B's scope
    cache = tmp_path / "cache"
    assert promote(built, cache, scope)
    assert (cache / "extensions" / scope / "ext_1" / "ext_1.so").read_text() == "A's module"
    assert not (cache / "extensions" / other).exists()


def test_promote_never_replaces_an_existing_scope_and_drops_symlinks(tmp_path) -> None:  # noqa: ANN001
    scope = build_scope("candidate A")
    cache = tmp_path / "cache"
    first = _built(tmp_path / "b1", scope, {"ext/ext.so": "first"})
    os.symlink("/etc/passwd", first / "extensions" / scope / "ext" / "leak")
    assert promote(first, cache, scope)
    assert not (cache / "extensions" / scope / "ext" / "leak").exists()
    second = _built(tmp_path / "b2", scope, {"ext/ext.so": "second"})
    assert not promote(second, cache, scope)
    assert (cache / "extensions" / scope / "ext" / "ext.so").read_text() == "first"
    assert [p.name for p in (cache / "extensions").iterdir()] == [scope]  # no temp copies left
    assert [p.name for p in (cache / "extensions" / scope).iterdir()] == ["ext"]


def test_an_extension_the_scope_lacks_is_added_beside_the_ones_it_has(tmp_path) -> None:  # noqa: ANN001
    """The same source built by another recipe version (its module name changes with it): the new build joins the
    scope. Before 2026-11-27 an existing scope took nothing more, and every `eval` of that source rebuilt."""
    scope = build_scope("candidate A")
    cache = tmp_path / "cache"
    assert promote(_built(tmp_path / "b1", scope, {"kx_v1/kx_v1.so": "recipe 1"}), cache, scope)
    both = _built(tmp_path / "b2", scope, {"kx_v1/kx_v1.so": "again", "kx_v2/kx_v2.so": "recipe 2"})
    assert promote(both, cache, scope)
    assert (cache / "extensions" / scope / "kx_v1" / "kx_v1.so").read_text() == "recipe 1"  # first writer still wins
    assert (cache / "extensions" / scope / "kx_v2" / "kx_v2.so").read_text() == "recipe 2"
    assert not promote(both, cache, scope)  # nothing left to add
    assert sorted(p.name for p in (cache / "extensions" / scope).iterdir()) == ["kx_v1", "kx_v2"]


def test_scope_is_the_whole_source() -> None:
    assert build_scope("x = 1\n") != build_scope("x = 1\n# same kernel, other text\n")


def test_a_build_over_the_scope_limit_stays_out_and_the_oldest_scopes_go_past_the_cache_limit(tmp_path,  # noqa: ANN001
                                                                                               monkeypatch) -> None:
    """Red team 8: a 538 MB .so of a static array kept in the cache for good, one per variant of a source."""
    from kevolve.sandbox.build import cache as bc

    monkeypatch.setattr(bc, "CACHE_MAX", 2500)
    store = tmp_path / "cache"
    big = build_scope("bloated")
    assert not promote(_built(tmp_path / "b0", big, {"kx_1/kx_1.so": "x" * 2000}), store, big, max_bytes=1000)
    assert not (store / "extensions" / big).exists()
    scopes = [build_scope(f"variant {i}") for i in range(3)]
    for i, s in enumerate(scopes):  # 1000 bytes each: the third passes the 2500-byte limit
        assert promote(_built(tmp_path / f"b{i + 1}", s, {"kx_1/kx_1.so": "y" * 1000}), store, s)
        os.utime(store / "extensions" / s, (1000 + i, 1000 + i))  # added in this order
    assert not (store / "extensions" / scopes[0]).exists()  # the oldest went
    assert all((store / "extensions" / s / "kx_1" / "kx_1.so").exists() for s in scopes[1:])
    assert not [p for p in (store / "extensions").iterdir() if p.name.startswith(".")]  # no tombstone left
