"""The sandbox's defaults that the command line shows in its help: one home, read by `SandboxConfig` and by the
commands (which pass a value only when the user gave one). Ground floor: imports nothing, so `--help` stays fast."""

TIMEOUT_S = 300.0  # hard wall-clock limit of one worker job
TRIALS = 30  # minimum timed trials (adaptive beyond)
MAX_TIMING_S = 10.0  # stop adding trials after this long
MAX_SLOWDOWN = 100.0  # stop a candidate whose calls take this many times the reference's (0: never)
TOLERANCE_FACTOR = 8.0  # allowed error = factor x eager's own + floor
