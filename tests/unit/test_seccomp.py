"""The candidate runner's seccomp filter (sandbox/isolate/seccomp.py) in a real child process: what it refuses,
and that threads, children and socketpairs still work under it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kevolve.sandbox.isolate import seccomp

pytestmark = pytest.mark.skipif(not seccomp.supported(), reason="no filter written for this machine")

PROBE = r"""
import ctypes, socket, subprocess, threading
from kevolve.sandbox.isolate import seccomp
assert seccomp.install() == ""
libc = ctypes.CDLL(None, use_errno=True); libc.syscall.restype = ctypes.c_long
def sc(nr, *a):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(x) for x in a]); return r, ctypes.get_errno()
out = {
  "socket": sc(41, 1, 1, 0), "x32_socket": sc(41 | 0x40000000, 1, 1, 0), "shmget": sc(29, 0, 4096, 0o1600),
  "clone3": sc(435, 0, 88), "setpriority": sc(141, 0, 0, -5 & 0xffffffff), "sched_setscheduler": sc(144, 0, 1, 0),
  "pidfd_getfd": sc(438, 0, 0, 0),
}
# another process's limits, CPU set, I/O priority (red team 6: the judge's open-file limit lowered to 12); the
# caller's own (pid 0) stay: a 16-byte rlimit read back, the CPU set it already has
import os
buf = ctypes.create_string_buffer(16); mask = ctypes.create_string_buffer(128)
assert libc.syscall(ctypes.c_long(204), ctypes.c_long(0), ctypes.c_long(128), mask) > 0  # sched_getaffinity
out.update(prlimit_other=sc(302, os.getppid(), 7, 0, 0), setaffinity_other=sc(203, os.getppid(), 128, 0),
           ioprio_set=sc(251, 1, 0, 0), kcmp=sc(312, 0, 0, 0, 0, 0))
own = {"prlimit_own": libc.syscall(ctypes.c_long(302), ctypes.c_long(0), ctypes.c_long(7), None, buf),
       "setaffinity_own": libc.syscall(ctypes.c_long(203), ctypes.c_long(0), ctypes.c_long(128), mask)}
assert own == {"prlimit_own": 0, "setaffinity_own": 0}, own
print({k: v[1] for k, v in out.items() if v[0] == -1})
t = threading.Thread(target=lambda: None); t.start(); t.join()
print(len(socket.socketpair()), subprocess.run(["/bin/echo", "child"], capture_output=True, text=True).stdout.strip())
"""


@pytest.mark.skipif(seccomp.platform.machine() != "x86_64", reason="the probe's numbers are x86-64's")
def test_the_filter_refuses_what_it_names_and_leaves_threads_children_and_socketpairs() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    refused, rest = done.stdout.splitlines()
    assert eval(refused) == {"socket": 1, "x32_socket": 1, "shmget": 1, "clone3": 38, "setpriority": 1,  # noqa: S307
                             "sched_setscheduler": 1, "pidfd_getfd": 1, "prlimit_other": 1, "setaffinity_other": 1,
                             "ioprio_set": 1, "kcmp": 1}
    assert rest == "2 child"


def test_every_machines_table_names_the_same_calls() -> None:
    x86, arm = (set(seccomp._ARCH[m][1]) for m in ("x86_64", "aarch64"))
    assert x86 == set(seccomp.DENIED) and x86 - arm == {"iopl", "ioperm"} and arm <= x86  # port I/O: x86 only
    assert len(seccomp.program("aarch64")) % 8 == 0 and len(seccomp.program("x86_64")) % 8 == 0


def test_a_runner_gives_up_ptrace_for_good_and_its_threads_too() -> None:
    # root keeps CAP_SYS_PTRACE otherwise: /proc/<judge>/mem opened whatever the judge's dumpable flag (2026-11-28);
    # and CAP_SYS_ADMIN / CAP_SYS_RESOURCE: past the user's pipe-buffer limit, 900 MB held in pipes (red team 8)
    import subprocess
    import sys

    child = ("import os, threading\n"
             "from kevolve.sandbox.isolate.procfs import drop_ptrace\n"
             "assert drop_ptrace()\n"
             "caps = lambda: {l.split(':')[0]: int(l.split()[1], 16) for l in open('/proc/thread-self/status')\n"
             "                if l.startswith(('CapEff', 'CapPrm', 'CapBnd', 'CapInh'))}\n"
             "seen = [caps()]\n"
             "t = threading.Thread(target=lambda: seen.append(caps())); t.start(); t.join()\n"
             "print(all(not v & (1 << 19 | 1 << 21 | 1 << 24) for c in seen for v in c.values()), len(seen))\n")
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["True", "2"], out.stderr[-500:]


def test_the_users_keys_leave_the_environment_block_but_not_its_programs() -> None:
    # /proc/PID/environ of the user's process held its LLM keys (procfs.hide_environ); libpq reads PGPASSWORD with C's
    # getenv and a child started from os.environ needs the real value: both still have it
    import os
    import subprocess
    import sys

    child = ("import ctypes, os, subprocess, sys\n"
             "from kevolve.sandbox.isolate.launch import is_secret\n"
             "from kevolve.sandbox.isolate.procfs import hide_environ\n"
             "n = hide_environ(is_secret)\n"
             "libc = ctypes.CDLL(None); libc.getenv.restype = ctypes.c_char_p\n"
             "block = open('/proc/self/environ', 'rb').read()\n"
             "kid = subprocess.run([sys.executable, '-c', 'import os; print(os.environ[\"PGPASSWORD\"])'],\n"
             "                     capture_output=True, text=True).stdout.strip()\n"
             "print(n >= 2, b'sk-canary' in block, b'pw-canary' in block, libc.getenv(b'PGPASSWORD').decode(),\n"
             "      os.environ['OPENAI_API_KEY'], kid, b'PATH=/' in block)\n")
    env = {**os.environ, "OPENAI_API_KEY": "sk-canary", "PGPASSWORD": "pw-canary"}
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60, env=env)
    assert out.stdout.split() == ["True", "False", "False", "pw-canary", "sk-canary", "pw-canary", "True"], out.stderr
