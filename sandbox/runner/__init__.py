"""Zone **runner** — one process per candidate, shared with the candidate's code (serve.py): runs the model on
the judge's command, one call or batch at a time. It holds nothing the verdict depends on; whatever it reports
(times, profiles, guards' findings) the judge treats as a claim."""
