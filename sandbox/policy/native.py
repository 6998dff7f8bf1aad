"""The native rules of the candidate policy: the C/C++/CUDA text a candidate hands to a compiler.

Sources passed to `load_inline` and CuPy's kernel classes are evaluated statically (policy_static);
a source that cannot be is itself a finding. The text is scanned the way the compiler will read it:
backslash-newlines spliced, comments removed, and string contents blanked for the rules about code
(kept for the rules about paths, assembly and section names). Every finding is `native` with a
sub-detail naming the rule.
"""

from __future__ import annotations

import ast
import re
import shlex
import sys
from typing import TYPE_CHECKING

from kevolve.sandbox.policy.flags import unsafe_flags
from kevolve.sandbox.policy.native_names import normalised, using_hits
from kevolve.sandbox.policy.preprocess import preprocessed
from kevolve.sandbox.policy.static import NotStatic, Text, plain
from kevolve.sandbox.policy.tables import HEAVY

if TYPE_CHECKING:
    from kevolve.sandbox.policy.scope import Model

Finding = tuple[str, int, str]
LOAD_INLINE = "torch.utils.cpp_extension.load_inline"
NATIVE_ENTRIES = frozenset((LOAD_INLINE, "cupy.RawKernel", "cupy.RawModule", "cupy.ElementwiseKernel",
                            "cupy.ReductionKernel"))
_FLAG_KWARGS = ("extra_cflags", "extra_cuda_cflags", "extra_sycl_cflags", "extra_ldflags", "extra_include_paths",
                "options")
_NOT_TEXT = ("name", "functions", "verbose", "with_cuda", "with_sycl", "is_python_module",
             "with_pytorch_error_handling", "keep_intermediates", "use_pch", "no_implicit_headers", "reduce_dims",
             "no_return", "return_tuple", "backend", "jitify", "translate_cucomplex", "enable_cooperative_groups",
             "reduce_type", "identity")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")

def _used(names: str, std: bool = True, as_value: bool = True) -> str:
    """Common words as libc functions: called, or taken as a value (`auto f = ::system;`, `run(&kill)`)
    where that is no plausible variable (as_value); not as members (x.open()) or other namespaces'
    functions (std::bind() where std=False)."""
    ns = r"(?:::)?(?:std::)?" if std else r"(?:::)?"
    called = r"(?<![\w.:])(?<!->)" + ns + rf"(?:{names})\s*\(|\(\s*" + ns + rf"(?:{names})\s*\)\s*\("
    taken = r"(?:&\s*|(?<![\w:])::)" + rf"(?:{names})\b|" + r"(?:[=,(]|\breturn)\s*" + ns + rf"(?:{names})\s*[;,)]"
    return f"{called}|{taken}" if as_value else called + r"|(?:&\s*|(?<![\w:])::)" + rf"(?:{names})\b"
_CUDA_API = (r"(?:cuda(?:Event|Stream|Device|Malloc|Free|Memcpy|Memset|Launch|Graph|Get|Set|Func|Ctx|Profiler|Host"
             r"|Peek|Thread|Runtime|Driver|Occupancy|Import|External|Array|Create|Destroy|Mem|Pointer|Ipc|Register"
             r"|Unregister|Signal|Wait|Peer|Library|Kernel)"
             r"|cu(?:Event|Stream|Ctx|Device|Mem|Module|Launch|Func|Graph|Init|Driver|Get|Link|Array|Pointer"
             r"|Profiler|Ipc|Occupancy|External|Import|Signal|Wait|Library|Kernel)"
             r"|cublas\w*|cudnn\w*|nvrtc\w*|cupti\w*|nccl\w*)\w*")
_KEYWORDS = frozenset(("return", "else", "case", "throw", "delete", "new", "sizeof", "co_return", "co_await",
                       "goto", "do", "typedef", "using", "__global__", "__device__", "decltype", "not", "and", "or",
                       "define", "undef", "ifdef", "ifndef", "if", "elif"))

# (sub-detail, pattern, view): "code" has strings blanked, "text" keeps them (comments removed in both).
RULES: tuple[tuple[str, str, str], ...] = (
    ("CPython C API", r"\b_?Py(?:[A-Z][a-z]\w*|_\w+)|\bTHP\w+|\bob_(?:type|refcnt)\b", "code"),
    ("pybind11 access to Python objects", r"\b(?:py|pybind11)\s*::\s*(?:object|handle|function|module_?\s*::\s*"
     r"(?:import|create_extension_module)|globals|eval\w*|exec|getattr|setattr|hasattr|delattr|reinterpret_\w+|"
     r"capsule|scoped_interpreter|initialize_interpreter|detail)\b|\.\s*attr\s*\(|\.\s*ptr\s*\(\s*\)", "code"),
    ("embedded interpreter", r"PYBIND11_EMBEDDED_MODULE|pybind11/(?:embed|eval)\.h|\bPython\.h\b|"
     r"\btorch::(?:jit|python)::|\bPyInterpreter\b", "text"),
    ("dynamic loading", r"\bdl(?:open|sym|vsym|mopen|info|error)\b|\bRTLD_\w+|\bLoadLibrary\w*|\bGetProcAddress\b",
     "code"),
    ("system call", r"\bsyscall\b|\b__NR_\w+", "code"),
    ("process control", r"\b(?:fork|vfork|execl|execle|execlp|execv|execve|execvp|execvpe|fexecve|popen|"
     r"posix_spawnp?|daemon|setsid|killpg|ptrace|process_vm_readv|process_vm_writev|sigaction)\b|"
     + _used(r"system|kill|raise") + "|" + _used(r"signal", as_value=False), "code"),
    ("process exit", r"\b(?:_exit|_Exit|quick_exit)\b|" + _used(r"exit|abort|terminate"), "code"),
    ("threads", r"\bpthread_\w+|\bthrd_\w+|(?<![\w.:>])(?:clone|clone3|__clone)\s*\(|\b(?:std::)?jthread\b|"
     r"\bstd::(?:thread|jthread|async)\b|\bboost::thread\b|\bCreateThread\b|"
     r"\bat::(?:launch|intraop_launch|internal::launch)\b|\bc10::ThreadPool\b|\bcu(?:da)?LaunchHostFunc\b|"
     r"\bcu(?:da)?StreamAddCallback\b", "code"),
    ("files", r"\b(?:fopen|fopen64|freopen|fdopen|open64|openat|opendir|mkfifo)\b|"
     + _used(r"open|creat|unlink|truncate", as_value=False)
     + r"|\b(?:basic_)?(?:i|o)?fstream\b|\b(?:basic_)?filebuf\b|\bfilesystem\b|\b(?:openat2|open_by_handle_at|"
     r"name_to_handle_at|fopen_s|_wfopen|tmpfile|mkstemp\w*|mkdtemp|__open\w*|__libc_open\w*)\b",
     "code"),
    ("sockets", r"\b(?:socket|getaddrinfo|gethostbyname|sendto|recvfrom)\b|"
     + _used(r"connect|bind|listen|accept", std=False, as_value=False)
     + r"|\bsockaddr\w*|\bcurl_\w+", "code"),
    ("sockets", r"#\s*include\s*[<\"](?:sys/socket\.h|netinet/|arpa/inet\.h|netdb\.h|curl/)", "text"),
    ("memory mapping", r"\b(?:mmap|mmap64|mprotect|mremap|madvise|shm_open|memfd_create)\b", "code"),
    ("environment", r"\b_{0,2}(?:getenv|secure_getenv|setenv|putenv|unsetenv|clearenv|environ)\b", "code"),
    ("environment", r"LD_PRELOAD", "text"),
    ("load-time constructor", r"__attribute__\s*\(\([^;{]*?\b_*(?:constructor|destructor|init_priority)_*\b|"
     r"\[\[[^\]]*\b_*(?:constructor|destructor)_*\b|\.init_array|"
     r"\bsection\s*\(\s*\"\s*\.(?:init|fini|ctors|dtors|preinit)", "text"),
    ("L2 persistence", r"\bcudaLimitPersistingL2CacheSize\b|\bCU_LIMIT_PERSISTING_L2_CACHE_SIZE\b|"
     r"\b(?:cuda|CU)?[aA]ccessPolicyWindow\b|\bcu(?:da)?CtxResetPersistingL2Cache\b|"
     r"\bcudaAccessPropertyPersisting\b|\bCU_ACCESS_PROPERTY_PERSISTING\b|\bhitProp\b", "code"),
    ("process-wide CUDA setting", r"\bcu(?:da)?(?:DeviceSetLimit|CtxSetLimit|SetDevice|DeviceReset|SetDeviceFlags|"
     r"DeviceSetCacheConfig|CtxSetCacheConfig|DeviceSetSharedMemConfig|CtxSetSharedMemConfig|ProfilerStart|"
     r"ProfilerStop|HostRegister|CtxSetCurrent|CtxPushCurrent|CtxPopCurrent|CtxCreate|CtxDestroy|"
     r"DevicePrimaryCtxReset|DevicePrimaryCtxSetFlags|ThreadExit|DeviceSetMemPool|DeviceSetGraphMemAttribute)\b|"
     r"\bcublasSetMathMode\b|\bcublasSetAtomicsMode\b",
     "code"),
    ("process-wide torch setting", r"\bglobalContext\b|\bset_num_(?:interop_)?threads\b|"
     r"\b(?:at|torch|c10)::(?:manual_seed|set_default_dtype)\b|\bset(?:Current)?CUDAStream\s*\(|"
     r"\bCUDACachingAllocator::set\w*|\bGradMode::set_enabled\b|\btls_set_dispatch_key_\w+|"
     r"\bset_current_seed\b|\bset_philox_offset_per_thread\b|\b(?:c10|at)::cuda::set_device\b|"
     r"\b(?:omp_set_num_threads|omp_set_dynamic|omp_set_nested|omp_set_max_active_levels|mkl_set_num_threads|"
     r"openblas_set_num_threads)\b", "code"),
    ("process-wide OS setting", r"\b(?:sched_set\w+|setpriority|setrlimit|prlimit\w*|prctl|ioprio_set|personality|"
     r"umask|chdir|fchdir|chroot|setuid|setgid|seteuid|setegid|setresuid|setresgid)\b|" + _used(r"nice", std=False),
     "code"),
    ("assembly behind a macro", r"#\s*define\s+\w+(?:\([^)]*\))?\s+(?:__asm__|__asm|asm)\b", "code"),
    ("operator registration", r"\bc10::Dispatcher\b|\bDispatcher::singleton\b|\b(?:torch|c10)::RegisterOperators\b|"
     r"\btorch::Library\b|\bTORCH_LIBRARY_FRAGMENT\b", "code"),
    ("token pasting", r"##|%:%:", "code"),
)
_COMPILED = tuple((what, re.compile(pattern), view) for what, pattern, view in RULES)
_ASM = re.compile(r"\b(?:__asm__|__asm|asm)\b\s*(?:(?:volatile|__volatile__|goto|inline)\s*)*\(")
_ASM_DENY = re.compile(r"\bsyscall\b|\bsysenter\b|\bint\s+\$?(?:0x80|128)\b|\.incbin|\.include|\.init_array|"
                       r"\.ctors|\.section|\.pushsection|\.(?:byte|[248]byte|hword|word|short|int|long|quad|octa|inst\w*|insn|"
                       r"ascii|asciz|string\d*|incbin|value|fill|skip|space|zero|dc(?:\.\w)?|rept|macro|irp\w*|"
                       r"[su]leb128|float|double|single|base64|nops|reloc|ds(?:\.\w)?)\b|"
                       r"\bwrmsr\b|@PLT|@GOTPCREL|\bcall[lq]?\s+[*%]", re.I)
_ESCAPE = re.compile(r"\\(x[0-9A-Fa-f]+|[0-7]{1,3}|u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|.)", re.S)
_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "v": "\v", "f": "\f", "a": "\a", "b": "\b", "e": "\x1b"}
# what may open an asm statement with a dot: PTX's declarations in device code (`.reg .pred p;`, `.local .b8 buf[8];`)
_ASM_DIRECTIVES = {".reg", ".local", ".shared", ".param", ".pragma"}
_ASM_STATEMENT = re.compile(r"[^;\n{}]+")
_ASM_LEAD = re.compile(r"\s*(?:[A-Za-z_$][\w$]*\s*:\s*|@!?%?\w+\s+)*(\.[A-Za-z_][\w.]*)?")


def _unescape(s: str) -> str:
    """A C string literal's escapes as the compiler reads them (`"\\x2ebyte"` is `.byte`)."""
    def one(m: re.Match) -> str:
        e = m.group(1)
        if e[0] in "xuU":
            return chr(int(e[1:], 16) % 0x110000)
        if e[0] in "01234567":
            return chr(int(e, 8))
        return _SIMPLE.get(e, e)
    return _ESCAPE.sub(one, s)


def _asm_text(region: str) -> str:
    """An asm statement's string literals as the compiler reads them: each literal's escapes first, then adjacent
    literals joined (`"sys\\x63" "all"` is `syscall`); others (operands' constraints) apart."""
    out, end = "", None
    for lit in re.finditer(r'"((?:[^"\\]|\\.)*)"', region):
        glue = "" if end is not None and not region[end:lit.start()].strip() else " "
        out, end = out + glue + _unescape(lit.group(1)), lit.end()
    return out


def _directive(body: str) -> str | None:
    """The first asm statement that opens with a directive PTX's declarations do not use (data, sections, macros …)."""
    for st in _ASM_STATEMENT.findall(body):
        d = _ASM_LEAD.match(st).group(1)
        if d and d.lower() not in _ASM_DIRECTIVES:
            return d
    return None
_INCLUDE = re.compile(r"(?:#|%:)\s*include(?:_next)?\s*(?:<([^>\n]*)>|\"([^\"\n]*)\"|(\S+))")
_DEFINE_API = re.compile(r"#\s*define\s+(" + _CUDA_API + r")\b")
_DECLARE_API = re.compile(r"\b([A-Za-z_][\w:]*(?:\s*<[^<>;{}()]*>)?)([\s*&]+)(" + _CUDA_API + r")\s*\(")


_CONTINUATION = re.compile(r"\\\r?\n|\?\?/\n")
_LEXEME = re.compile(r"//|/\*|[\"']")


def _splice(raw: str) -> tuple[str, list[int] | None]:
    """Join backslash-newline continuations as the preprocessor does; map each char back to `raw`
    (None: nothing was joined, the map is the identity)."""
    if not _CONTINUATION.search(raw):
        return raw, None
    out, index, last = [], [], 0
    for m in _CONTINUATION.finditer(raw):
        out.append(raw[last:m.start()])
        index.extend(range(last, m.start()))
        last = m.end()
    out.append(raw[last:])
    index.extend(range(last, len(raw)))
    return "".join(out), index


def _blank(chars: list[str], start: int, end: int, src: str) -> None:
    for j in range(start, end):
        if src[j] != "\n":
            chars[j] = " "


def _views(src: str) -> tuple[str, str]:
    """(code, text): comments blanked in both; string and char literal contents blanked in code."""
    code, text = list(src), list(src)
    i, n = 0, len(src)
    while True:
        m = _LEXEME.search(src, i)
        if m is None:
            break
        i, c = m.start(), m.group(0)
        if c in ("//", "/*"):
            end = src.find("\n", i) if c == "//" else src.find("*/", i + 2)
            end = n if end < 0 else end + (0 if c == "//" else 2)
            _blank(code, i, end, src)
            _blank(text, i, end, src)
            i = end
            continue
        prefix = re.search(r"[A-Za-z0-9_]*$", src[max(0, i - 64):i]).group(0)  # type: ignore[union-attr]
        if c == "'" and prefix and prefix not in ("L", "u", "U", "u8"):
            i += 1  # a digit separator (1'000), not a character literal
            continue
        raw = c == '"' and prefix in ("R", "LR", "uR", "UR", "u8R")
        r = re.match(r'"([^()\\\s]{0,16})\(', src[i:i + 18]) if raw else None
        if r:
            end = src.find(")" + r.group(1) + '"', i + len(r.group(0)))
            end = n if end < 0 else end + len(r.group(1)) + 2
        else:
            j = i + 1
            while j < n and src[j] != c and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            end = min(j + 1, n)
        _blank(code, i + 1, end - 1, src)
        i = end
    return "".join(code), "".join(text)


def scan_source(source: Text) -> list[tuple[int, str]]:
    """(python line, sub-detail) of every rule the C/C++/CUDA text breaks."""
    spliced, index = _splice(source.value)
    code, text = _views(spliced)
    norm = normalised(code)
    if norm is not code:  # rules run on the spelled-out code; report at the original line
        starts = [0] + [i + 1 for i, ch in enumerate(code) if ch == "\n"]
        hits_norm = [(starts[norm.count("\n", 0, m.start())], f"{what} ({m.group(0).strip()[:40]})")
                     for what, pattern, view in _COMPILED if view == "code" for m in pattern.finditer(norm)]
        code_hits = True
    else:
        hits_norm, code_hits = [], False

    def line(pos: int) -> int:
        return source.line_at(pos if index is None else index[min(pos, len(index) - 1)] if index else 0)

    hits = [(line(m.start()), f"{what} ({m.group(0).strip()[:40]})")
            for what, pattern, view in _COMPILED for m in pattern.finditer(code if view == "code" else text)]
    hits += [(line(pos), what) for pos, what in hits_norm] if code_hits else []
    hits += using_hits(code, line)
    hits += _asm_hits(code, text, line) + _declarations(code, line) + _includes(text, line)
    hits += _library_hits(code, line)
    return hits


def _asm_hits(code: str, text: str, line) -> list[tuple[int, str]]:  # noqa: ANN001
    hits = []
    for m in _ASM.finditer(code):
        depth, j = 1, m.end()
        while j < len(code) and depth:
            depth += {"(": 1, ")": -1}.get(code[j], 0)
            j += 1
        # adjacent literals are one string to the compiler ("fo" "pen" is "fopen"), as the preprocessed view joins
        body = _asm_text(text[m.end():j])
        bad = _ASM_DENY.search(body)
        if bad:
            hits.append((line(m.start()), f"host assembly ({bad.group(0)})"))
        elif d := _directive(body):  # an allow list: the deny list above names the ones seen so far
            hits.append((line(m.start()), f"assembler directive in asm ({d[:30]}): only PTX declarations may open a statement"))
        # names an asm string could call; a bare name is an asm label, which makes the declaration before it that
        # function (`int run(const char*) __asm__("system")`): tested as a call of it
        probe = f"{body.strip()}()" if re.fullmatch(r"\s*[A-Za-z_][\w.$@]*\s*", body) else body
        hits += [(line(m.start()), f"{what} in asm ({b.group(0)[:40]})") for what, pattern, view in RULES
                 if view == "code" for b in [re.search(pattern, probe)] if b]
    return hits


def _declarations(code: str, line) -> list[tuple[int, str]]:  # noqa: ANN001
    hits = [(line(m.start()), f"redefines the CUDA API name {m.group(1)}") for m in _DEFINE_API.finditer(code)]
    for m in _DECLARE_API.finditer(code):
        if m.group(1).split("::")[-1] not in _KEYWORDS:
            hits.append((line(m.start(3)), f"declares the CUDA API function {m.group(3)} (interposition)"))
    return hits


def _includes(text: str, line) -> list[tuple[int, str]]:  # noqa: ANN001
    hits = []
    for m in _INCLUDE.finditer(text):
        path = m.group(1) or m.group(2)
        if path is None:
            hits.append((line(m.start()), f"computed #include ({m.group(3)[:40]})"))
        elif _outside(path):
            hits.append((line(m.start()), f"#include of a file outside the toolkit headers ({path[:40]})"))
    return hits


def _library_hits(code: str, line) -> list[tuple[int, str]]:  # noqa: ANN001
    own = set(re.findall(r"\bTORCH_LIBRARY\s*\(\s*(\w+)", code))
    return [(line(m.start()), f"registers kernels for another operator namespace ({m.group(1)})")
            for m in re.finditer(r"\bTORCH_LIBRARY_IMPL\s*\(\s*(\w+)", code) if m.group(1) not in own]


def _text_args(call: ast.Call, entry: str) -> tuple[list[tuple[str, ast.expr]], list[tuple[str, ast.expr]]]:
    """(kernel-text arguments, flag arguments) of a compiler entry point, each with its label."""
    texts: list[tuple[str, ast.expr]] = []
    flags: list[tuple[str, ast.expr]] = []
    for i, a in enumerate(call.args):
        if entry == "cupy.RawModule" and i == 2 or entry == "cupy.RawKernel" and i == 2:
            flags.append(("options", a))
        elif not (i == 0 and entry == LOAD_INLINE) and not (i == 1 and entry == "cupy.RawKernel"):
            texts.append((f"argument {i + 1}", a))
    for k in call.keywords:
        if k.arg in _FLAG_KWARGS:
            flags.append((str(k.arg), k.value))
        elif k.arg not in _NOT_TEXT:
            texts.append((str(k.arg), k.value))
    return texts, flags


def check_native_call(call: ast.Call, entry: str, model: Model) -> list[Finding]:
    """Findings for one call of a compiler entry point (load_inline, CuPy kernels)."""
    out: list[Finding] = []
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return [("native", call.lineno, f"kernel source not statically known ({entry} with */** arguments)")]
    texts, flags = _text_args(call, entry)
    macros = _macros(flags, model)
    for label, expr in texts:
        if label in ("build_directory", "path") or entry == "cupy.RawModule" and label == "argument 2":
            out.append(("files", call.lineno, f"{entry} reads or writes a path ({label})"))
            continue
        try:
            source = model.static.text(expr)
        except (NotStatic, RecursionError):
            out.append(("native", expr.lineno, f"kernel source not statically known ({label} of {entry})"))
            continue
        found = scan_source(source)
        out += [("native", ln, what) for ln, what in found]
        out += _preprocessed_hits(source, expr.lineno, macros, {what for _, what in found})
    for label, expr in flags:
        try:
            flag_text = model.static.text(expr)
        except (NotStatic, RecursionError):
            out.append(("native", expr.lineno, f"compiler flags not statically known ({entry})"))
            continue
        if label != "extra_include_paths":  # paths, not flags: where they point is _include_dirs'
            out += [("native", expr.lineno, f"compiler flag {bad[:40]!r} is not on the allowlist (policy/flags.py)")
                    for bad in unsafe_flags(flag_text.value.split("\n"))]
        out += [("native", ln, what) for ln, what in scan_source(flag_text)]
    out += _include_dirs(call, model)
    out += _extension_name(call, entry, model)
    return out


def _macros(flags: list[tuple[str, ast.expr]], model: Model) -> tuple[str, ...]:
    """The -D/-U flags among the call's statically known flags: the preprocessed view defines them as the compiler
    will (`-DF=fopen`, then `F(path)` in the source)."""
    out: list[str] = []
    for _label, expr in flags:
        try:
            value = model.static.text(expr).value
        except (NotStatic, RecursionError):
            continue
        for text in value.split("\n"):
            try:
                out += [t for t in shlex.split(text) if t.startswith(("-D", "-U"))]
            except ValueError:
                continue
    return tuple(out)


def _preprocessed_hits(source: Text, line: int, macros: tuple[str, ...], seen: set[str]) -> list[Finding]:
    """The rules on the text as the compiler reads it after preprocessing (policy/preprocess.py), reported at the
    call's line; what the text as written already showed is not repeated."""
    pre = preprocessed(_splice(source.value)[0], macros)
    if pre is None or pre == source.value:
        return []
    hits = {what for _, what in scan_source(plain(pre, line))} - seen
    return [("native", line, f"{what}, after preprocessing") for what in sorted(hits)]


_INCLUDE_FLAG = re.compile(r"^-(?:I|isystem|iquote|idirafter|iprefix|iwithprefix\w*)\s*(\S*)|^--include-path[= ]?(\S*)")


def _outside(path: str) -> bool:
    return path.startswith(("/", "~")) or ".." in path


def _include_dirs(call: ast.Call, model: Model) -> list[Finding]:
    """Include directories may not be absolute or climb out (`extra_include_paths=["/"]` plus
    `#include "etc/passwd"` quotes a host file into the compile log)."""
    out: list[Finding] = []
    for k in call.keywords:
        if k.arg not in _FLAG_KWARGS:
            continue
        try:
            items = model.static.text(k.value).value.split("\n")
        except (NotStatic, RecursionError):
            continue  # reported as flags not statically known
        for item in (i.strip() for i in items):
            m = _INCLUDE_FLAG.match(item)
            path = item if k.arg == "extra_include_paths" else (m.group(1) or m.group(2)) if m else None
            if path and _outside(path):
                out.append(("files", call.lineno, f"include directory outside the build ({path[:40]})"))
    return out


def _extension_name(call: ast.Call, entry: str, model: Model) -> list[Finding]:
    """load_inline's name and function names end up in build paths, -D flags and generated C++:
    they must be plain identifiers, known before the build, and no module's name."""
    if entry != LOAD_INLINE:
        return []
    out: list[Finding] = []
    node = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "name"), None)
    names = _static_strings(node, model)
    if names is None and _numbered_name(node, model, 0):
        names = ["numbered_extension"]
    if names is None or len(names) != 1 or not _IDENTIFIER.fullmatch(names[0]):
        out.append(("native", call.lineno, "extension name not a static identifier"))
    elif names[0] in sys.stdlib_module_names or names[0] in HEAVY or names[0].startswith("kevolve"):
        out.append(("native", call.lineno, f"extension named like the module {names[0]}"))
    funcs = call.args[4] if len(call.args) > 4 else next((k.value for k in call.keywords if k.arg == "functions"), None)
    if funcs is not None:
        if isinstance(funcs, ast.Dict):  # {name: docstring}
            fnames = _static_strings(ast.List(elts=[k for k in funcs.keys if k is not None], ctx=ast.Load()), model)
            fdocs = _static_strings(ast.List(elts=funcs.values, ctx=ast.Load()), model)
        else:
            fnames, fdocs = _static_strings(funcs, model), []
        if fnames is None or fdocs is None or not all(_IDENTIFIER.fullmatch(f) for f in fnames) \
                or any(re.search(r'["\\\n]', d) for d in fdocs):
            out.append(("native", call.lineno, "functions= not static identifiers (they are pasted into C++)"))
    return out


_NUMBER_CALLS = frozenset((("id",), ("len",), ("int",), ("os", "getpid")))


def _numbered_name(node: ast.expr | None, model: Model, depth: int) -> bool:
    """An f-string of identifier text and numbers only (f"ext_{os.getpid()}", f"k{id(self)}", f"{n:d}")."""
    if isinstance(node, ast.Name) and depth < 4 and node.id not in model.opaque and len(model.values[node.id]) == 1:
        return _numbered_name(model.values[node.id][0][1], model, depth + 1)
    if not isinstance(node, ast.JoinedStr):
        return False
    for part in node.values:
        if isinstance(part, ast.Constant):
            if not re.fullmatch(r"\w*", str(part.value)):
                return False
        elif isinstance(part, ast.FormattedValue):
            spec = part.format_spec
            int_spec = isinstance(spec, ast.JoinedStr) and len(spec.values) == 1 \
                and isinstance(spec.values[0], ast.Constant) and str(spec.values[0].value)[-1:] in ("d", "x")
            v = part.value
            chain = (v.func.id,) if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) else \
                next(iter(model.resolve(v.func)), None) if isinstance(v, ast.Call) else None
            if not (int_spec or chain in _NUMBER_CALLS):
                return False
    return True


def _static_strings(node: ast.expr | None, model: Model) -> list[str] | None:
    if node is None:
        return []
    try:
        v = model.static.eval(node)
    except (NotStatic, RecursionError):
        return None
    items = v if isinstance(v, list) else [v]
    return [i.value for i in items] if all(isinstance(i, Text) for i in items) else None
