"""Benchmark the archive: ingest rate and hybrid-search latency over N synthetic kernels.

    python scripts/bench_archive.py --kernels 10000 [--db sqlite:///path.db] [--queries 200] [--embedder minilm]

Ingest goes through ``Archive.put_many`` in batches (embeddings included). Search runs a mix of
short free-text queries and whole problem sources (the agent's retrieve), a third of them with
filters; latency is end to end (query embedding included) and, separately, with the query vector
precomputed, so the two costs can be told apart, and split by query kind (short phrase, whole problem
source). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from kevolve.archive.embed import HashingEmbedder, MiniLM
from kevolve.archive.records import KernelFilter
from kevolve.archive.store import Archive
from kevolve.archive.synthetic import OPS, SNIPPETS, entries, problem_source

WORDS = ["warp shuffle reduction", "shared memory tiled matmul", "vectorized float4 loads relu", "tensor cores wmma",
         "fused bias relu epilogue", "softmax online max", "layernorm welford", "atomic add histogram",
         "loop unrolling gelu", "conv2d implicit gemm", "transpose bank conflicts", "cumulative sum scan"]


class TimedEmbedder:
    """Wraps an embedder and adds up the seconds spent in it."""

    def __init__(self, inner) -> None:  # noqa: ANN001
        self.inner, self.seconds, self.texts = inner, 0.0, 0
        self.name, self.dim = inner.name, inner.dim
        self.fixed: np.ndarray | None = None

    def embed(self, texts):  # noqa: ANN001, ANN201
        if self.fixed is not None:  # "precomputed query vector" mode
            return self.fixed[None, :]
        t = time.perf_counter()
        out = self.inner.embed(texts)
        self.seconds += time.perf_counter() - t
        self.texts += len(texts)
        return out


def pct(xs: list[float], p: float) -> float:
    return float(np.percentile(np.array(xs), p))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=10_000)
    ap.add_argument("--problems", type=int, default=250)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--db", default=None, help="database URL (default: a fresh SQLite file in a temp folder)")
    ap.add_argument("--embedder", choices=["minilm", "hashing"], default="minilm")
    ap.add_argument("--threads", type=int, default=None, help="torch threads for MiniLM batches")
    ap.add_argument("--skip-ingest", action="store_true", help="search an archive already filled (--db)")
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="kevolve-bench-")
    url = args.db or f"sqlite:///{Path(tmp) / 'bench.db'}"
    emb = TimedEmbedder(MiniLM(threads=args.threads) if args.embedder == "minilm" else HashingEmbedder())
    emb.inner.embed(["warm up"])
    load_before = os.getloadavg()
    arch = Archive(url, embedder=emb)

    made = [] if args.skip_ingest else list(entries(args.kernels, n_problems=args.problems, seed=1))
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(0, len(made), args.batch):
        arch.put_many(made[i:i + args.batch])
        print(f"ingested {min(i + args.batch, len(made))}/{len(made)} in {time.perf_counter() - t0:.0f}s",
              file=sys.stderr, flush=True)
    ingest_s, ingest_cpu_s = time.perf_counter() - t0, time.process_time() - c0
    ingest_embed_s = emb.seconds

    rng = random.Random(2)
    ops = list(OPS)
    queries: list[tuple[str, KernelFilter | None]] = []
    for i in range(args.queries):
        text = rng.choice(WORDS) if i % 2 == 0 else problem_source(op := rng.choice(ops), OPS[op])
        f = KernelFilter(level=rng.randint(1, 3), technique=rng.choice(list(SNIPPETS))) if i % 3 == 0 else None
        queries.append((text, f))
    for text, f in queries[:5]:  # warm the caches (page cache, statement cache)
        arch.search(text, k=10, filters=f)

    cpu: dict[bool, list[float]] = {False: [], True: []}

    def run(fixed: bool) -> list[float]:
        out = []
        for text, f in queries:
            emb.fixed = emb.inner.embed([text])[0] if fixed else None
            if not fixed:
                emb.inner._cache = {}  # noqa: SLF001 - measure the cold query path, not the cache
            t, c = time.perf_counter(), time.process_time()
            hits = arch.search(text, k=10, filters=f)
            out.append((time.perf_counter() - t) * 1000)
            cpu[fixed].append((time.process_time() - c) * 1000)
            assert hits or f is not None, f"no hits for {text[:40]!r}"
        emb.fixed = None
        return out

    end_to_end = run(fixed=False)
    no_embed = run(fixed=True)
    kinds = {"phrase": [i for i in range(len(queries)) if i % 2 == 0],
             "source": [i for i in range(len(queries)) if i % 2 == 1]}
    by_kind = {kind: {"wall_p50": round(pct([end_to_end[i] for i in idx], 50), 1),
                      "wall_p95": round(pct([end_to_end[i] for i in idx], 95), 1),
                      "cpu_p50": round(pct([cpu[False][i] for i in idx], 50), 1),
                      "cpu_p95": round(pct([cpu[False][i] for i in idx], 95), 1)} for kind, idx in kinds.items()}
    load_after = os.getloadavg()
    size = Path(url.removeprefix("sqlite:///")).stat().st_size if url.startswith("sqlite:///") else None
    result = {
        "kernels": args.kernels, "problems": args.problems, "db": url.split("://")[0], "embedder": emb.name,
        "kernels_in_archive": arch.stats().kernels,
        "ingest_s": round(ingest_s, 1), "ingest_per_s": round(len(made) / ingest_s, 1) if made else None,
        "ingest_embedding_s": round(ingest_embed_s, 1), "ingest_cpu_s": round(ingest_cpu_s, 1),
        "search_ms": {"p50": round(pct(end_to_end, 50), 1), "p95": round(pct(end_to_end, 95), 1),
                      "p99": round(pct(end_to_end, 99), 1), "mean": round(statistics.mean(end_to_end), 1)},
        "search_ms_query_vector_precomputed": {"p50": round(pct(no_embed, 50), 1), "p95": round(pct(no_embed, 95), 1),
                                               "p99": round(pct(no_embed, 99), 1)},
        "search_cpu_ms": {"p50": round(pct(cpu[False], 50), 1), "p95": round(pct(cpu[False], 95), 1)},
        "search_cpu_ms_query_vector_precomputed": {"p50": round(pct(cpu[True], 50), 1),
                                                   "p95": round(pct(cpu[True], 95), 1)},
        "search_ms_by_query_kind": by_kind,
        "catalog_loads": getattr(getattr(arch, "catalog", None), "loads", None),
        "queries": args.queries, "db_bytes": size, "cpus": os.cpu_count(), "cpu": platform.processor() or platform.machine(),
        "loadavg_before": [round(x, 1) for x in load_before], "loadavg_after": [round(x, 1) for x in load_after],
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
