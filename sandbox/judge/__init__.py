"""Zone **judge** — trusted, one process per device (serve.py; the baseline worker is its timing-only twin):
the problem, its truth and inputs, the clock, every comparison, the rules and the verdict. It trusts the problem
file and nothing a runner says: a runner's answers are checked, its times are diagnostics."""
