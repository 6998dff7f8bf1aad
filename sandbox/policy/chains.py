"""Classify one resolved dotted name (`torch.backends.cudnn.benchmark`, `os.system` …) by the tables.

`classify(chain, ctx)` answers which category a read, call, store or deletion of that name belongs
to, or None when it is allowed. A chain is checked as written and again from every component that
names a dangerous module (`torch.os.system` is `os.system`), since allowed modules hold references
to modules they import.
"""

from __future__ import annotations

import ast
import importlib
import sys
import types
from functools import cache
from typing import Callable

from kevolve.languages import array_modules
from kevolve.sandbox.policy.tables import (ALLOW, ARRAY_FILE_NAMES, ARRAY_RNG_NAMES, BACKENDS, BACKENDS_QUERIES,
                                           FILE_METHODS, GLOBAL_HOOK_PREFIX, LIBRARIES,
                                           HEAVY, KNOWN_MODULES, MEMBERS, MODULES, NN_LAYERS, OWN_SUBMODULES, PARTIAL,
                                           PRIVATE_OK, REROOT, RNG_NAMES, RNG_ROOTS, SETTER_PREFIXES, STDLIB,
                                           STDLIB_DENIED, TOGGLE_NAMES)

Chain = tuple[str, ...]
Verdict = tuple[str, str] | None  # (category, what) or allowed

TYPE: Chain = ("type",)  # the builtin, which hands out classes: followed like one
TYPE_OF: Chain = ("type()",)  # the class of some object: type(x)
_ARRAY_MODULES = array_modules()  # NumPy and the kernel languages' NumPy-like libraries (kevolve/languages.py)


def is_class(chain: Chain) -> bool:
    """A class the candidate did not define (CamelCase by convention), `type`, or what type() returned."""
    last = chain[-1]
    return chain in (TYPE, TYPE_OF) or (last[:1].isupper() and not last.isupper())


def nn_layer_class(chain: Chain) -> bool:
    """`torch.nn.LayerNorm` and its like: a layer class a model may hand around as a value (Swin's
    `norm_layer=nn.LayerNorm` passed on to a `downsample` given as a parameter), as KernelBench's own problems do.
    Constructing one is what the candidate may do by name; what the policy must follow on a foreign class it still
    sees wherever the value goes: assignments on anything the candidate did not create, dunders, getattr/setattr
    with names, each flagged by itself."""
    return len(chain) == 3 and chain[:2] == ("torch", "nn") and chain[2] in NN_LAYERS


def rerooted_at(chain: Chain) -> int | None:
    """Where a chain passes through a dangerous module with something after it (`torch.os.system`:
    1), unless that is the package's own submodule; None when it does not."""
    for i in range(len(chain) - 2, 0, -1):
        if chain[i] in REROOT and ".".join(chain[:i + 1]) not in OWN_SUBMODULES:
            return i
    return None


def canonical(chain: Chain) -> Chain:
    """The chain from the last dangerous module it passes through (`torch.os.environ` is `os.environ`)."""
    i = rerooted_at(chain)
    return chain if i is None else chain[i:]


def dunder(name: str) -> bool:
    """`__x__`."""
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def private(name: str) -> bool:
    """`_x`, not a dunder."""
    return name.startswith("_") and not dunder(name)


def dotted(chain: Chain) -> str:
    """`('torch', 'nn')` -> 'torch.nn'."""
    return ".".join(chain)


def module_category(name: str) -> Verdict:
    """The category of importing module `name` (None: allowed)."""
    top = name.split(".")[0]
    if top.startswith("kevolve"):
        return "import", f"import of {name} (the evaluator's own modules)"
    if top in LIBRARIES:
        return None if name in LIBRARIES else ("import", f"import of {name} (not on the import allowlist)")
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        cat = MODULES.get(".".join(parts[:i]))
        if cat is not None:
            return cat, f"import of {name}"
    if top in HEAVY:
        if any(private(p) for p in parts[1:]):
            return "import", f"import of {name} (private module)"
        return None
    if top in STDLIB or top in PARTIAL:
        if name == top or name in KNOWN_MODULES:
            return None
        return "import", f"import of {name} (not on the import allowlist)"
    return "import", f"import of {name} (not on the import allowlist)"


@cache
def stdlib_api(module: str) -> frozenset[str]:
    """Public, non-module names of an allowed stdlib module (computed here: they are light)."""
    mod = importlib.import_module(module)
    names = getattr(mod, "__all__", None) or [n for n in dir(mod) if not n.startswith("_")]
    return frozenset(n for n in names if not isinstance(getattr(mod, n, None), types.ModuleType))


def store_category(chain: Chain) -> tuple[str, str]:
    """Assigning or deleting an attribute of something the candidate imported."""
    if chain[:2] == tuple(BACKENDS.split(".")):
        return "process_setting", f"sets {dotted(chain)}"
    if chain[:2] == ("os", "environ"):
        return "environment", f"changes {dotted(chain)}"
    return "monkeypatch", f"rebinds {dotted(chain)}"


_STDLIB_NAMES = frozenset(sys.stdlib_module_names)


def classify(chain: Chain, ctx: str) -> Verdict:
    """Category of using `chain` in context ctx ('load', 'call'); None when allowed. Also checked from
    every component naming a standard-library module with something after it (`torch.os.system`,
    `torch.utils.cpp_extension.logging.currentframe`): allowed modules hold the modules they import."""
    reroots = [i for i in range(1, len(chain) - 1) if (chain[i] in REROOT or chain[i] in _STDLIB_NAMES)
               and dotted(chain[:i + 1]) not in OWN_SUBMODULES]
    for i in [*reversed(reroots), 0]:
        verdict = _classify_one(chain[i:], ctx)
        if verdict is not None:
            return verdict
    return None


def _classify_one(chain: Chain, ctx: str) -> Verdict:
    name = dotted(chain)
    root = chain[0]
    if len(chain) == 1:
        return None  # the module itself: its import statement is judged on its own
    if root.startswith("kevolve"):
        return "import", f"uses {name} (the evaluator's own modules)"
    if root in LIBRARIES:
        return _library(chain)
    if len(chain) > 1 and (name in KNOWN_MODULES or name in MODULES):
        verdict = module_category(name)
        if verdict is not None:
            return verdict[0], f"uses {name}"
    if chain[:2] == ("os", "environ"):
        # reading one named variable (os.environ.get, os.environ[...]) is judged where it happens
        return None if len(chain) == 2 or chain[2] == "get" else ("environment", f"uses {name}")
    if chain[:2] == ("os", "getenv"):
        return None
    for i in range(len(chain), 0, -1):
        prefix = dotted(chain[:i])
        cat = MEMBERS.get(prefix) or STDLIB_DENIED.get(prefix) or MODULES.get(prefix)
        if cat == ALLOW:
            break
        if cat is not None:
            return cat, f"uses {name}"
    if root in STDLIB and len(chain) > 1 and chain[1] not in stdlib_api(root) \
            and f"{root}.{chain[1]}" not in KNOWN_MODULES:
        return "import", f"uses {name} (not in the public API of {root})"
    if root in HEAVY:
        return _heavy(chain, ctx)
    if root in _STDLIB_NAMES and root not in STDLIB and root not in PARTIAL:
        return "import", f"uses {name} (a module off the allowlist, reached through another)"
    return None


def _library(chain: Chain) -> Verdict:
    """A chain into an allowed small library (tables.LIBRARIES): each step a listed member of the module before it;
    past a member that is not itself a listed module (a function, a class) the general rules judge what follows."""
    for i in range(1, len(chain)):
        members = LIBRARIES.get(dotted(chain[:i]))
        if members is None:
            return None
        if chain[i] not in members:
            return "import", f"uses {dotted(chain)} (not among {dotted(chain[:i])}'s allowed members)"
    return None


def _heavy(chain: Chain, ctx: str) -> Verdict:
    name, last = dotted(chain), chain[-1]
    for i, part in enumerate(chain[1:], 1):
        if private(part) and not (chain[1] == "ops" and i >= 3) and dotted(chain[:i + 1]) not in PRIVATE_OK:
            return "import", f"uses {name} (private)"
    if chain[:2] == tuple(BACKENDS.split(".")) and len(chain) > 2 and ctx == "call" \
            and not last.startswith(BACKENDS_QUERIES):
        return "process_setting", f"calls {name}"
    if last.startswith(SETTER_PREFIXES):
        return "process_setting", f"uses {name}"
    if last in RNG_NAMES and dotted(chain[:-1]) in RNG_ROOTS:
        return "process_setting", f"uses {name} (the global RNG)"
    if last.startswith(GLOBAL_HOOK_PREFIX):
        return "monkeypatch", f"uses {name} (a hook on every module)"
    if last in FILE_METHODS:
        return "files", f"uses {name}"
    return _heavy_by_name(chain, ctx)


def _heavy_by_name(chain: Chain, ctx: str) -> Verdict:
    """Rules by member name wherever it lives: numpy and CuPy re-export their file readers and RNG
    under several modules (numpy.rec.fromfile, numpy.random.mtrand.seed), and a mode switch is a
    setting whatever object carries it."""
    name, last = dotted(chain), chain[-1]
    if chain[0] in _ARRAY_MODULES and last in ARRAY_FILE_NAMES:
        return "files", f"uses {name} (file I/O)"
    if chain[0] in _ARRAY_MODULES and chain[1:2] == ("random",) and last in ARRAY_RNG_NAMES:
        return "process_setting", f"uses {name} (the global RNG)"
    if last == "import_module":
        return "import", f"uses {name} (imports a module by name)"
    if last in TOGGLE_NAMES and ctx == "call":
        return "process_setting", f"calls {name} (switches a process-wide mode)"
    return None


_SELF_DECORATORS = frozenset(("classmethod", "property", "setter", "getter", "deleter", "no_grad", "inference_mode",
                              "enable_grad", "ignore", "unused", "export", "lru_cache", "cache"))


_CTX_METHODS = frozenset(("forward", "backward", "setup_context", "jvp", "vjp"))


def binds_self(fn: ast.AST, cls: ast.AST | None, resolve: Callable[[ast.expr], set[Chain]]) -> bool:
    """A def whose first parameter is the method's own self, cls or ctx: undecorated, decorated only by
    names that keep that binding (torch's and functools' wrappers among them), or an autograd Function's
    static forward/backward (ctx). A @staticmethod's or a lambda's first parameter is whatever the caller
    passes (`Box.put(obj, v)`); taking a method through its class is policy_forms.method_through_class."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    for d in fn.decorator_list:
        d = d.func if isinstance(d, ast.Call) else d
        name = d.attr if isinstance(d, ast.Attribute) else d.id if isinstance(d, ast.Name) else None
        if name == "staticmethod" and _autograd_ctx(fn, cls) or name in _SELF_DECORATORS:
            continue
        if not any(c[0] in HEAVY or c[0] == "functools" for c in resolve(d)):
            return False
    return True


def _autograd_ctx(fn: ast.FunctionDef | ast.AsyncFunctionDef, cls: ast.AST | None) -> bool:
    """forward/backward of a class deriving from (torch.autograd.)Function: their first parameter is ctx."""
    bases = getattr(cls, "bases", ())
    return fn.name in _CTX_METHODS and any(
        (b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", None)) == "Function" for b in bases)
