"""Zone **parent** — the orchestrator's side of an evaluation (the CLI's or the loop's process): starts judges,
hands them problems and candidates, reads their verdicts, caches baselines. Never imports or runs candidate
code; the only candidate process it starts itself is the confined Nsight Compute target (ncu.py)."""
