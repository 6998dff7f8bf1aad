"""A candidate-like worker that leaves processes behind, each way a candidate could.

Run as `python escaper.py MARK stay|exit` in its scratch folder (or its text with `python -c`):
(i) a double-forked `setsid` daemon that sleeps forever, (ii) `Popen(start_new_session=True)`,
(iii) a `setsid` child that calls fork() in a loop, each child sleeping forever. MARK is in every
one's argv (fork copies it; the Popen gets it as an argument). Their pids, as this process sees
them, go to ./pids; then ./ready appears, and the worker sleeps (`stay`) or exits (`exit`).
"""
import os
import subprocess
import sys
import time

MARK, MODE = sys.argv[1], sys.argv[2]


def forever():
    while True:
        time.sleep(1)


def note(pid):
    with open("pids", "a") as f:
        f.write(f"{pid}\n")


if os.fork() == 0:  # (i)
    os.setsid()
    if os.fork() == 0:
        note(os.getpid())
        forever()
    os._exit(0)
note(subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(1)", MARK],
                      start_new_session=True).pid)  # (ii)
if os.fork() == 0:  # (iii)
    os.setsid()
    note(os.getpid())
    while True:
        try:
            if os.fork() == 0:
                forever()
        except OSError:
            pass
        time.sleep(0.05)
time.sleep(0.5)  # a few rounds of (iii)
with open("ready", "w") as f:
    f.write("ready")
if MODE == "exit":
    os._exit(0)
forever()
