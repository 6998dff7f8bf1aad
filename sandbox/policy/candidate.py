"""The candidate policy: capabilities a candidate's source may not use, checked before anything runs.

A candidate is untrusted code that has read `sandbox/`. This module reads its source (never runs or
imports it) and rejects it, before it reaches a worker, if it uses a capability that could reach
the evaluator's state or change the conditions it is measured under: frames and introspection,
rebinding what it did not create, process-wide settings, threads, processes, exiting, files, the
network, the environment, imports off the allowlist, and native code that does any of these.
It is the first wall, not the only one (docs/VERIFICATION.md, "Candidate policy").

    violation = check_policy(source, allow=frozenset({"files"}))
    violation.reason  # 'policy_threads: import of threading at line 3 (pass --allow threads to permit)'
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from kevolve.contract import parse_python
from kevolve.languages import kernel_modules

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Category:
    """One kind of capability the policy denies: its reason code, what it means, what is checked."""

    name: str
    description: str
    checks: tuple[str, ...]

    @property
    def code(self) -> str:
        """The reason code: `policy_<name>`."""
        return f"policy_{self.name}"


_CATEGORIES = (
    Category("introspection", "reaching the evaluator's state through the interpreter", (
        "sys (all of it but sys.exit), inspect, gc, ctypes, builtins, importlib, types, pickle, marshal, traceback …",
        "frame, traceback, generator and code attributes (f_back, tb_frame, gi_frame, co_code, mro …)",
        "dunder attributes other than __init__, __new__, __name__, __qualname__, __doc__, __module__, __version__ "
        "(also in match class patterns); dunder names such as __builtins__, __import__",
        "defining dunder methods beyond __init__, __call__, __repr__, __len__, __getitem__, __iter__, __enter__ … "
        "(__array_interface__, __getattr__, __del__ …); type(name, bases, ns); str.format fields that walk "
        "attributes, or templates the policy cannot read",
        "eval, exec, compile, globals, locals, vars, dir, breakpoint, id; getattr & co. as values; code in strings "
        "(torch.utils.benchmark, torch.jit.CompilationUnit)",
        "getattr/setattr/delattr/hasattr with a name computed at run time (except on the method's own self)",
        "modules and foreign classes passed around as values (the policy follows them only through imports "
        "and plain aliases); profilers (torch.profiler, torch.autograd.profiler); torch.fx code generation",
        "attrgetter, methodcaller, string.Formatter, typing.get_type_hints and others that reach attributes or "
        "evaluate strings; numpy's as_strided and ctypeslib; CuPy's raw CUDA runtime bindings")),
    Category("monkeypatch", "changing objects the candidate did not create", (
        "assigning or deleting attributes or items of imported modules and their members, setattr/delattr on them",
        "item stores on anything but what the candidate made (self, its literals, locals bound to call results); "
        "a method taken through its class with another object as self",
        "assigning any dunder attribute (__module__, __class__, __code__ …), or attributes of builtin types and "
        "of objects a call returned (type(x).forward = …)",
        "in-place methods (append, update …) on data attributes of imported modules",
        "torch.library, torch.overrides (TorchFunctionMode), global module hooks (register_module_*)")),
    Category("process_setting", "process-wide settings the reference was not measured under", (
        "torch.set_*/use_deterministic_algorithms and set_* of numpy, CuPy, Triton; torch.backends.* assignments "
        "and setter calls (cudnn.benchmark, allow_tf32 …); torch.cuda.set_device and set_stream",
        "the global RNGs (torch.manual_seed, get/set_rng_state, numpy.random.seed/get_state wherever re-exported …)",
        "context managers entered by hand (.__enter__(), ExitStack, held across a yield); enable()/disable() calls",
        "torch.compile / torch.compiler / torch.export, torch.cuda.tunable, allocator changes, CuPy device and "
        "limit setters (persisting L2)")),
    Category("environment", "reading the whole environment, secrets in it, or changing it", (
        "os.environ enumerated or passed around, read with a computed or credential-like name, or written; "
        "os.putenv/unsetenv, os.path.expandvars",)),
    Category("network", "talking to the network", (
        "socket, ssl, urllib, http, requests …, torch.hub, torch.distributed, torch.utils.model_zoo",)),
    Category("processes", "starting, signalling or replacing processes", (
        "subprocess, pty, signal, os.system/popen/fork/exec*/spawn*/kill/setsid …, help() (a pager)",)),
    Category("threads", "running code beside the timed call", (
        "threading, _thread, concurrent, asyncio, multiprocessing, torch.multiprocessing, torch.utils.data, "
        "torch.jit.fork",)),
    Category("files", "reading or writing files", (
        "open, io, pathlib, shutil, tempfile, glob …, os file calls, torch.save/load/from_file, numpy/CuPy file "
        "I/O by member name (numpy.rec.fromfile, .dump …), tofile/load_file, absolute or '..' include directories, "
        "torch.utils.cpp_extension beyond load_inline, load_inline(build_directory=), "
        "cupy.RawModule(path=)",)),
    Category("exit", "ending the process", ("exit, quit, sys.exit, os._exit, os.abort, SystemExit, atexit",)),
    Category("native", "C/C++/CUDA source that escapes the kernel", (
        "sources passed to load_inline and CuPy's kernel classes must be statically known",
        "no CPython C API or pybind11 object access, dlopen, syscalls, fork/exec/system, threads, files, sockets, "
        "mmap, getenv, /proc, load-time constructors, x86 syscalls or data directives in asm, token pasting "
        "(namespace aliases and using-directives followed)",
        "no redefinition or declaration of CUDA API functions, persisting L2, process-wide CUDA, torch or OS settings, "
        "operator registration for other namespaces; no dangerous compiler flags (--wrap, -fplugin, -include …)")),
    Category("import", "importing a module off the allowlist", (
        f"allowed: torch (minus the parts above and private _ names), {', '.join(kernel_modules())}, numpy, math, "
        "cmath, functools, itertools, operator, typing, dataclasses, collections, enum, abc, numbers, warnings, "
        "string, re, copy, hashlib, bisect, heapq, textwrap, contextlib, time, __future__; os.path and named "
        "os.environ reads",
        "never: kevolve, kevolve_problem; no relative or star imports; no import by string (torch.ops.import_module)")),
)
CATEGORIES: dict[str, Category] = {c.name: c for c in _CATEGORIES}
"""The registry, in reporting priority: when a source breaks several rules, the first category wins."""
_PRIORITY = {name: i for i, name in enumerate(CATEGORIES)}


@dataclass(frozen=True)
class PolicyViolation:
    """The one rule a candidate broke that the policy reports (the highest-priority one)."""

    category: str
    line: int
    detail: str

    @property
    def reason(self) -> str:
        """One line: `policy_<category>: <what> at line N (pass --allow <category> to permit)`."""
        return (f"policy_{self.category}: {self.detail} at line {self.line} "
                f"(pass --allow {self.category} to permit)")


class UnknownCategory(ValueError):
    """An --allow value that names no category."""


def validate_allow(allow: frozenset[str] | tuple[str, ...] | list[str]) -> frozenset[str]:
    """The allow set, or UnknownCategory naming the first value that is not a category or 'all'."""
    for a in allow:
        if a != "all" and a not in CATEGORIES:
            raise UnknownCategory(f"unknown policy category {a!r} (choose from all, {', '.join(CATEGORIES)})")
    return frozenset(allow)


def find_violations(source: str) -> list[PolicyViolation]:
    """Every rule the source breaks, in priority then line order (a syntax error yields none)."""
    from kevolve.sandbox.policy.python import python_findings

    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return []  # kevolve.contract.check_solution_source reports it
    found = {PolicyViolation(c, line, what) for c, line, what in python_findings(tree, source)}
    return sorted(found, key=lambda v: (_PRIORITY[v.category], v.line, v.detail))


def check_policy(source: str, allow: frozenset[str] = frozenset()) -> PolicyViolation | None:
    """The violation to report for a candidate source, or None if it may run. `allow` names
    categories to permit ('all' disables the policy)."""
    allow = validate_allow(allow)
    if "all" in allow:
        return None
    for v in find_violations(source):
        if v.category not in allow:
            log.debug("candidate rejected: %s", v.reason)
            return v
    return None
