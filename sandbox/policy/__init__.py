"""Zone **policy** — the parent's static reading of a candidate's source (Python and the native text it hands a
compiler), before anything runs. Runs in the parent (and in the judge, which re-checks). Trusts nothing it reads:
every input is the candidate's text; nothing here imports torch or executes candidate code."""
