"""Issue 36's candidate set: real LLM-written kernels from the KernelBench leaderboard, over KernelBench's problems.

    python scripts/make_leaderboard_mix.py --leaderboard LEADERBOARD --kernelbench KERNELBENCH --out runs/lbmix

LEADERBOARD: a checkout or git directory of github.com/anneouyang/KernelBenchLeaderboard (kevolve.kernelbench.leaderboard
reads it); KERNELBENCH: a checkout or git directory of github.com/ScalingIntelligence/KernelBench holding --kb-commit
(default 423217d, the KernelBench the project's GPU runs use). Nothing fetched is committed: OUT goes in runs/.

The rule (leaderboard_mix): every level-1 and level-2 kernel goes through kevolve's candidate policy (what `kevolve
eval` and `bench` check before building: kevolve.contract.check_solution_source, then the policy); refused ones are left
out of the set, as a refusal costs no build and would count as a cheap evaluation beside KernelBench's built ones. Of
each level's problems with at least --per-problem distinct kernels left, --per-level spread evenly over the problem
numbers (a problem whose Model class KernelBench changed since the leaderboard's copy is left out: the kernels were
written for another module); of each, --per-problem kernels spread over the leaderboard's own reported speedup from the slowest to the
fastest (2: the slowest and the fastest, so every problem brings its slowest kernel). KernelBench's harness cannot
evaluate them all in the device time (about 71 s each on the H100), so a fixed subset is chosen here, before any run:
every --kb-every-th candidate in (level, problem, sample) order.

Writes OUT/solutions/level_L_problem_N_sample_S_kernel.py (the layout `kevolve bench --solutions` and
scripts/bench_throughput.py read), OUT/kernelbench/ (KernelBench at the commit: src/kernelbench/ for its harness and
KernelBench/levelL/ with the chosen problems only: the suite `kevolve bench --suite` reads), OUT/kb_subset.txt
(L/N/S per line), OUT/manifest.json (the rule, both commits, every candidate's model, speedup and origin, the
policy's counts and refusals, each problem's input size). The kernels were written for the leaderboard's 2024
problem sizes; the suite is KernelBench's at the commit, as in the project's earlier leaderboard runs.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
from collections import Counter
from pathlib import Path

from kevolve.agent.llm.replay import CorpusError
from kevolve.contract import check_solution_source
from kevolve.kernelbench.leaderboard import Mix, MixPick, Source, leaderboard_mix, leaderboard_samples
from kevolve.sandbox.policy.source import policy_reason

LEVELS = (1, 2)
_PROBLEM = re.compile(r"^KernelBench/level(\d)/(\d+)_[^/]*\.py$")


class SetError(ValueError):
    """Bad input for this script; the message is one line."""


def refusal(code: str) -> str | None:
    """What `kevolve eval` says before building a candidate (sandbox/parent/local.py: the same two checks)."""
    return check_solution_source(code) or policy_reason(code)


def git(repo: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", repo, *args], capture_output=True)


def kernelbench_tar(repo: str, commit: str) -> tuple[str, tarfile.TarFile]:
    """(full commit hash, the commit's src/kernelbench and level folders as a tar); SetError when it has none."""
    r = git(repo, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")
    if r.returncode != 0:
        raise SetError(f"--kernelbench {repo}: not a git checkout or directory holding commit {commit}")
    full = r.stdout.decode().strip()
    paths = ["src/kernelbench"] + [f"KernelBench/level{lv}" for lv in LEVELS]
    r = git(repo, "archive", "--format=tar", full, *paths)
    if r.returncode != 0:
        raise SetError(f"--kernelbench {repo}@{commit[:7]}: no {' '.join(paths)} ({r.stderr.decode().strip()[:120]})")
    return full, tarfile.open(fileobj=io.BytesIO(r.stdout))


def problem_members(tar: tarfile.TarFile) -> dict[tuple[int, int], tarfile.TarInfo]:
    return {(int(m.group(1)), int(m.group(2))): t for t in tar.getmembers() if (m := _PROBLEM.match(t.name))}


def input_mb(source: str) -> float | None:
    """MB of get_inputs()'s tensors at the problem's own sizes, shapes only (the meta device; KernelBench's trusted file)."""
    try:
        import torch

        ns: dict[str, object] = {}
        with torch.device("meta"):
            exec(compile(source, "<problem>", "exec"), ns)  # noqa: S102 - KernelBench's own problem file
            inputs = ns["get_inputs"]()  # type: ignore[operator]
        return round(sum(t.numel() * t.element_size() for t in inputs if isinstance(t, torch.Tensor)) / 1e6, 1)
    except Exception:  # noqa: BLE001 - a size is a note in the manifest, never a reason to stop
        return None


def write_set(out: Path, picks: list[MixPick], tar: tarfile.TarFile, members: dict[tuple[int, int], tarfile.TarInfo],
              kb_every: int) -> tuple[list[str], dict[str, float | None]]:
    """The solutions, the trimmed KernelBench and kb_subset.txt; returns (the subset's keys, input MB per problem file)."""
    for sub in ("solutions", "kernelbench"):
        shutil.rmtree(out / sub, ignore_errors=True)
    (out / "solutions").mkdir(parents=True)
    for t in tar.getmembers():
        if t.isfile() and t.name.startswith("src/kernelbench/"):
            dest = out / "kernelbench" / t.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(tar.extractfile(t).read())  # type: ignore[union-attr]
    sizes: dict[str, float | None] = {}
    for p in picks:
        (out / "solutions" / f"level_{p.level}_problem_{p.number}_sample_{p.sample}_kernel.py").write_text(p.kernel.code)
        t = members[(p.level, p.number)]
        dest = out / "kernelbench" / t.name
        if not dest.exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            text = tar.extractfile(t).read()  # type: ignore[union-attr]
            dest.write_bytes(text)
            sizes[t.name] = input_mb(text.decode())
    ordered = sorted(picks, key=lambda p: (p.level, p.number, p.sample))
    subset = [f"{p.level}/{p.number}/{p.sample}" for i, p in enumerate(ordered) if i % kb_every == 0]
    (out / "kb_subset.txt").write_text("".join(k + "\n" for k in subset))
    return subset, sizes


def manifest(args: argparse.Namespace, lb_commit: str, kb_commit: str, total: int, mix: Mix, subset: list[str],
             sizes: dict[str, float | None]) -> dict:
    picks, refused = mix.picks, mix.refused
    return {
        "rule": {"levels": list(LEVELS), "per_level": args.per_level, "per_problem": args.per_problem,
                 "kb_every": args.kb_every, "text": (__doc__ or "").split("\n\nThe rule ", 1)[1].split("\n\n")[0]},
        "leaderboard": {"source": args.leaderboard, "commit": lb_commit},
        "kernelbench": {"source": args.kernelbench, "commit": kb_commit},
        "policy": {"checked": total, "passed": total - len(refused),
                   "refused": [{"problem": s.problem, "model": s.model, "origin": s.origin, "reason": why}
                               for s, why in refused]},
        "problems": {"count": len({(p.level, p.number) for p in picks}), "input_mb": sizes,
                     "left_out_changed": [f"{lv}/{n}" for lv, n in mix.changed]},
        "candidates": [{"key": f"{p.level}/{p.number}/{p.sample}", "problem": p.kernel.problem, "model": p.kernel.model,
                        "leaderboard_speedup": p.kernel.speedup, "origin": p.kernel.origin,
                        "kb_subset": f"{p.level}/{p.number}/{p.sample}" in subset} for p in picks],
        "kb_subset": subset,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--leaderboard", required=True, help="KernelBenchLeaderboard checkout or git directory")
    ap.add_argument("--kernelbench", required=True, help="KernelBench checkout or git directory")
    ap.add_argument("--kb-commit", default="423217d", help="KernelBench commit (default: the project's, 423217d)")
    ap.add_argument("--out", type=Path, required=True, help="set folder, git-ignored (e.g. runs/lbmix)")
    ap.add_argument("--per-level", type=int, default=11, help="problems per level (default 11)")
    ap.add_argument("--per-problem", type=int, default=2, help="kernels per problem, slowest to fastest (default 2)")
    ap.add_argument("--kb-every", type=int, default=5, help="KernelBench's subset: every Nth candidate (default 5)")
    args = ap.parse_args(argv)
    if min(args.per_level, args.per_problem, args.kb_every) < 1:
        print("error: --per-level, --per-problem and --kb-every must be at least 1", file=sys.stderr)
        return 2
    if args.out.exists() and any(args.out.iterdir()) and not (args.out / "manifest.json").exists():
        print(f"error: --out {args.out}: a folder that is not a set this script wrote; give another", file=sys.stderr)
        return 2
    try:
        samples = list(leaderboard_samples(Source(args.leaderboard), LEVELS))
        kb_commit, tar = kernelbench_tar(args.kernelbench, args.kb_commit)
    except (CorpusError, SetError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    members = problem_members(tar)
    suite = {k: tar.extractfile(t).read().decode() for k, t in members.items()}  # type: ignore[union-attr]
    mix = leaderboard_mix(samples, refusal, args.per_level, args.per_problem, suite)
    picks, refused = list(mix.picks), mix.refused
    if not picks:
        print("error: no problem has enough kernels that pass the policy", file=sys.stderr)
        return 2
    subset, sizes = write_set(args.out, picks, tar, members, args.kb_every)
    lb = git(args.leaderboard, "rev-parse", "HEAD")
    data = manifest(args, lb.stdout.decode().strip() if lb.returncode == 0 else "", kb_commit, len(samples), mix,
                    subset, sizes)
    (args.out / "manifest.json").write_text(json.dumps(data, indent=1) + "\n")
    levels = Counter(p.level for p in picks)
    print(f"{args.out}: {len(picks)} candidates over {data['problems']['count']} problems "
          f"({', '.join(f'level {lv}: {n}' for lv, n in sorted(levels.items()))}); policy: {len(samples) - len(refused)} "
          f"of {len(samples)} leaderboard kernels pass, {len(refused)} refused; {len(mix.changed)} problems left out "
          f"(KernelBench changed their Model class); KernelBench subset {len(subset)}")
    for s, why in refused:
        print(f"  refused {s.problem} ({s.model}): {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
