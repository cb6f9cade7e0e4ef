"""``SourceModule`` on the CPU: compile CUDA C as C++ with the system compiler.

The kernel source is wrapped the way PyCUDA wraps it (``extern "C" { ... }``
unless ``no_extern_c=True``), preceded by a prelude header that defines the
CUDA device language (``_native/gpuedu_prelude.h``), followed by one generated
entry point per ``__global__`` function, and built into a shared library that
``function.Module`` loads with ctypes.

Building happens in three steps:

1. a preprocessing pass (``-E``) with ``__global__`` kept as a marker finds the
   kernels and the functions they call, so that kernels with no barrier or warp
   intrinsic can run their threads as a plain loop (see ``analyse``);
2. the translation unit is compiled with ``-O2 -fPIC -shared`` and linked with
   the runtime's host side (``_native/gpuedu_host.cpp``: signals, stack
   mappings), compiled once into the cache so that its system headers never
   meet the user's code;
3. the library is stored in the kernel cache (``cache_dir()``), keyed by the
   source, the options, the compiler and the prelude, so the next
   ``SourceModule`` of the same source only loads it.

Teaching aid: ``set_schedule("reverse")`` (or ``GPUEDU_SCHEDULE=reverse``) runs
the threads of a block in another order, so that a missing ``__syncthreads``
shows up as a wrong answer; lessons reach it through ``gpuedu.emulator.compiler``.

Environment variables:

- ``CXX``: the C++ compiler (default: g++, then clang++, then c++ on PATH);
- ``GPUEDU_CACHE_DIR``: the kernel cache (default ``gpuedu/kernels`` in the platform's cache folder:
  ``$XDG_CACHE_HOME`` or ``~/.cache`` on Linux, ``~/Library/Caches`` on macOS);
- ``GPUEDU_SCHEDULE``: ``forward`` (default), ``reverse`` or ``random``;
- ``GPUEDU_KERNEL_TIMEOUT``: seconds after which a launch stops with a LaunchError
  (``set_kernel_timeout``/``get_kernel_timeout`` change and read it at run time);
- ``GPUEDU_FIBERS=always``: run every kernel's threads as fibers (if the analysis
  missed a barrier, e.g. one called through a function pointer);
- ``GPUEDU_CXXFLAGS``: extra host-compiler flags; ``GPUEDU_FIBER_IMPL=ucontext``
  uses the portable (slower) context switch.
"""
import hashlib
import json
import os
import sys
import re
import shutil
import stat
import subprocess
import tempfile
import warnings

from . import function as _function
from ._errors import CompileError
from .function import Module

NATIVE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native")

# Intrinsics that make threads wait for one another: a kernel that reaches one
# (directly or through the functions it calls) runs its threads as fibers.
# wmma::mma_sync is one: a warp's lanes meet there to compute its product once (mma.h).
# So are the cooperative groups' methods and functions that wait (block.sync(), tile.shfl_down(),
# cg::reduce, cg::coalesced_threads(), ...): the scan sees their names, not their groups' types,
# so a function of the same name elsewhere only costs a kernel the speed of the plain loop.
BARRIER_NAMES = frozenset("""
    __syncthreads __syncthreads_count __syncthreads_and __syncthreads_or __syncwarp
    __shfl_sync __shfl_up_sync __shfl_down_sync __shfl_xor_sync __ballot_sync __any_sync __all_sync
    __reduce_add_sync __reduce_min_sync __reduce_max_sync __reduce_and_sync __reduce_or_sync __reduce_xor_sync
    __match_any_sync __match_all_sync __gpuedu_shfl block_barrier warp_collective mma_sync
    sync shfl shfl_up shfl_down shfl_xor ballot any all match_any match_all reduce inclusive_scan exclusive_scan
    coalesced_threads
""".split())

CXX_FLAGS = [
    "-std=c++17", "-O2", "-fPIC", "-shared", "-w", "-pthread",
    "-fno-strict-aliasing",          # CUDA code reinterprets pointers freely (float4 loads, bit casts)
    "-fno-semantic-interposition",   # lets kernels inline into the thread loop although they are exported
    "-fno-threadsafe-statics",       # static __shared__ registration runs on one OS thread
    "-fno-math-errno",
    "-fno-finite-loops",             # a spin loop must spin (and stop on Ctrl-C), not vanish
    "-fstack-clash-protection",      # big frames probe each page, so a fiber's overflow hits its guard page
    "-fstack-protector-strong",      # an overrun local array stops the launch (__stack_chk_fail, gpuedu_launch.h)
    "-U_FORTIFY_SOURCE",             # fortified longjmp refuses to leave a fiber's stack
    "-fvisibility=default",
]

_INSTALL_HINT = (
    "the gpuedu CPU emulator compiles CUDA C with a C++ compiler (C++17). To install one:\n"
    "  Debian/Ubuntu/WSL:  sudo apt install g++\n"
    "  Fedora:             sudo dnf install gcc-c++\n"
    "  macOS:              xcode-select --install\n"
    "  conda:              conda install -c conda-forge cxx-compiler"
)


# ---- the C++ compiler and the cache ---------------------------------------------------

_cxx = None


def find_cxx():
    """``(path, version_line)`` of the C++ compiler the emulator uses; CompileError if there is none.

    ``$CXX`` wins; otherwise g++, clang++, then c++ on PATH.
    """
    global _cxx
    if _cxx is not None:
        return _cxx
    wanted = os.environ.get("CXX")
    candidates = [wanted] if wanted else ["g++", "clang++", "c++"]
    for name in candidates:
        path = shutil.which(name)
        if not path:
            continue
        try:
            out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0:
            _cxx = (path, (out.stdout.splitlines() or [name])[0].strip())
            return _cxx
    if wanted:
        raise CompileError(f"CXX={wanted!r} is not a working C++ compiler: unset CXX to use g++ or clang++ "
                           f"from PATH, or point it at a compiler.\n" + _INSTALL_HINT)
    raise CompileError("no C++ compiler found (looked for g++, clang++ and c++ on PATH); " + _INSTALL_HINT)


def _cxx_identity():
    """A cheap fingerprint of the compiler binary (path, size, mtime): no subprocess on cache hits."""
    wanted = os.environ.get("CXX")
    for name in ([wanted] if wanted else ["g++", "clang++", "c++"]):
        path = shutil.which(name)
        if path:
            real = os.path.realpath(path)
            st = os.stat(real)
            return f"{real}:{st.st_size}:{st.st_mtime_ns}"
    find_cxx()  # raises the install hint
    return ""


def cache_dir():
    """The folder of compiled kernel modules: ``$GPUEDU_CACHE_DIR``, else ``gpuedu/kernels`` in the platform's
    cache folder (``$XDG_CACHE_HOME``, by default ``~/.cache``, on Linux; ``~/Library/Caches`` on macOS).

    The modules in it run as your own code, so the folder must be yours alone: it is created with
    mode 0700, and one that is a symbolic link, belongs to another user or that others may write
    into is refused (CompileError, with the reason). One that cannot be created or written is
    replaced, for this process, by a private temporary folder, with a warning.
    """
    return trusted_folder(cache_path())


def cache_path():
    """The kernel cache's path by the rule above, without creating or checking it (doctor reports it)."""
    return os.path.abspath(os.environ.get("GPUEDU_CACHE_DIR") or os.path.join(user_cache_root(), "gpuedu", "kernels"))


def user_cache_root():
    """The platform's folder for a user's caches: ``$XDG_CACHE_HOME`` (an absolute path) or ``~/.cache`` on
    Linux and other POSIX systems, ``~/Library/Caches`` on macOS (as platformdirs decides)."""
    if sys.platform == "darwin":
        return os.path.join(os.path.expanduser("~"), "Library", "Caches")
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):           # the XDG rule: a relative value is invalid and ignored
        return xdg
    return os.path.join(os.path.expanduser("~"), ".cache")


_trusted = {}   # folder asked for -> the folder used


def cache_problem(path):
    """Why ``path`` cannot be trusted as a kernel cache, or None (also when it does not exist yet)."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):   # not there (yet): creating it will tell
        return None
    except OSError as exc:
        return f"it cannot be examined ({exc.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return "it is a symbolic link, which another user could point at their own files"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a folder"
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"it belongs to another user (uid {st.st_uid})"
    if st.st_mode & 0o022:
        return (f"other users may write into it (mode {stat.S_IMODE(st.st_mode):o}): after checking what is in it, "
                f"`chmod 700` it, or delete it and let gpuedu create it again")
    return None


def trusted_folder(path):
    """``path`` as a kernel cache (created 0700), or a private temporary folder when it cannot be written."""
    if path in _trusted:
        return _trusted[path]
    refuse = ("the kernel cache {path} is refused: {problem}. Compiled kernels run as your own code, so the "
              "cache must be yours alone: set GPUEDU_CACHE_DIR to a folder of your own (gpuedu creates it with "
              "mode 0700)")
    problem = cache_problem(path)
    if problem:
        raise CompileError(refuse.format(path=path, problem=problem))
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError as exc:
        reason = f"it cannot be created ({exc.strerror})"
    else:
        problem = cache_problem(path)   # again: it may have appeared meanwhile, made by someone else
        if problem:
            raise CompileError(refuse.format(path=path, problem=problem))
        if os.access(path, os.W_OK | os.X_OK):
            _trusted[path] = path
            return path
        reason = "it is not writable"
    fallback = tempfile.mkdtemp(prefix="gpuedu-kernels-")   # mode 0700, this user's
    warnings.warn(f"the kernel cache {path} cannot be used ({reason}); kernels compile into {fallback} for this "
                  f"process and will compile again next time. Set GPUEDU_CACHE_DIR to a writable folder of your "
                  f"own to keep them.", stacklevel=3)
    _trusted[path] = fallback
    return fallback


_prelude_hash = None

# Bump when ``analyse`` or the generated entry points change: cached modules keep
# the kernel list an older scan found (e.g. none inside an extern "C" { } block).
SCANNER_VERSION = 5


def _prelude_version():
    global _prelude_hash
    if _prelude_hash is None:
        h = hashlib.sha256()
        for folder, dirs, files in sorted(os.walk(NATIVE_DIR)):
            dirs.sort()
            for name in sorted(files):   # the headers of subfolders too (cooperative_groups/reduce.h)
                rel = os.path.relpath(os.path.join(folder, name), NATIVE_DIR)
                with open(os.path.join(folder, name), "rb") as f:
                    h.update(rel.encode() + b"\0" + f.read())
        h.update(" ".join(CXX_FLAGS).encode())
        h.update(f"scanner {SCANNER_VERSION}".encode())
        _prelude_hash = h.hexdigest()
    return _prelude_hash


# ---- teaching aid: the order in which a block's threads run ---------------------------------

def set_schedule(order, seed=0):
    """Run each block's threads ``"forward"``, ``"reverse"`` or in a ``"random"`` order.

    A kernel that is missing a ``__syncthreads`` often still gives the right answer
    in the forward order; ``"reverse"`` or ``"random"`` makes the race show up.
    """
    _function.set_schedule(order, seed)


def get_schedule():
    """The current thread order: ``"forward"``, ``"reverse"`` or ``"random"``."""
    return _function.get_schedule()


def set_kernel_timeout(seconds):
    """Stop launches that run longer than ``seconds`` (None: no limit; env ``GPUEDU_KERNEL_TIMEOUT``)."""
    _function.set_kernel_timeout(seconds)


def get_kernel_timeout():
    """The current kernel timeout in seconds, or None for no limit.

    Code that shortens the limit for a while restores it with this::

        previous = get_kernel_timeout()
        set_kernel_timeout(2.0)
        try:
            ...
        finally:
            set_kernel_timeout(previous)
    """
    return _function.get_kernel_timeout()


# ---- options -------------------------------------------------------------------------

def _translate_options(options, include_dirs):
    """nvcc options -> C++ compiler flags: defines and include paths honoured, the rest ignored."""
    flags = []
    opts = options.split() if isinstance(options, str) else list(options or [])
    i = 0
    while i < len(opts):
        opt = str(opts[i])
        if opt in ("-D", "-I", "-U", "--define-macro", "--include-path") and i + 1 < len(opts):
            letter = {"--define-macro": "-D", "--include-path": "-I"}.get(opt, opt)
            flags.append(letter + str(opts[i + 1]))
            i += 2
            continue
        if opt.startswith(("-D", "-U")):
            flags.append(opt)
        elif opt.startswith("-I"):
            flags.append("-I" + os.path.abspath(opt[2:]))
        elif opt.startswith(("--define-macro=", "--include-path=")):
            key, value = opt.split("=", 1)
            flags.append(("-D" if key == "--define-macro" else "-I") + value)
        i += 1
    for d in include_dirs or []:
        flags.append("-I" + os.path.abspath(str(d)))
    return flags


# ---- finding kernels, and which ones need fibers ------------------------------------------

_DYNAMIC_SHARED = re.compile(r"\bextern\s+__shared__\b([^;]*);")


_STATIC_SHARED = re.compile(r"\b__shared__\b([^;{}\n]*);")   # one-line declarations
_NOT_CODE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
_ATTRIBUTES = re.compile(r"__align__\s*\([^()]*\)|__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)|alignas\s*\([^()]*\)")


def _declared_names(declaration):
    """Names declared by ``float a[4][4], b[8]`` (the text after __shared__); [] if unsure."""
    text = _ATTRIBUTES.sub(" ", declaration)
    parts, depth, start = [], 0, 0
    for k, ch in enumerate(text):
        if ch in "[(<":
            depth += 1
        elif ch in "])>":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:k])
            start = k + 1
    parts.append(text[start:])
    names = []
    for part in parts:
        head = re.split(r"[\[=]", part, 1)[0]
        found = re.findall(r"[A-Za-z_]\w*", head)
        if not found or "(" in head:
            return []
        names.append(found[-1])
    return names


def _rewrite_source(source, profile=False, tag=""):
    """Adapt CUDA declarations to the prelude, keeping every line where it was.

    ``extern __shared__`` arrays all name the runtime's dynamic shared buffer;
    each static ``__shared__`` variable registers itself (so the runtime can fill
    shared memory with garbage before each block); ``static __shared__`` is the
    same as ``__shared__``.  Comments and string literals are left alone.
    A profiled build registers on every execution of the declaration, so that
    every thread runs the same branches (a static guard would send only the
    first thread into the registration).
    """
    counter = [0]
    storage = "[[maybe_unused]] const bool" if profile else "static const bool"

    def register(m):
        regs = []
        for name in _declared_names(m.group(1)):
            counter[0] += 1
            regs.append(f"{storage} __gpuedu_shared_{tag}{counter[0]} = "
                        f"__gpuedu::register_shared((void*)&{name}, sizeof({name}));")
        return m.group(0) + " ".join(regs)

    def rewrite_code(code):
        code = re.sub(r"\bstatic(\s+)__shared__\b", r"\1__shared__", code)
        code = _DYNAMIC_SHARED.sub(lambda m: f'extern {m.group(1).strip()} __asm__("__gpuedu_dynamic_shared");',
                                   code)
        return _STATIC_SHARED.sub(register, code)

    out, last = [], 0
    for m in _NOT_CODE.finditer(source):
        out.append(rewrite_code(source[last:m.start()]))
        out.append(m.group(0))
        last = m.end()
    out.append(rewrite_code(source[last:]))
    return "".join(out)


_LINE_MARKER = re.compile(r'^# (\d+) "((?:[^"\\]|\\.)*)"(.*)$')
_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"')
_CHAR = re.compile(r"'(?:\\.|[^'\\\n])*'")
_TOKEN = re.compile(r'[A-Za-z_]\w*|::|""|\S')  # "" is a string literal after _STRING blanked it


def _user_code(preprocessed, tu_name):
    """The preprocessed text of the user's own files, and the header files it came from."""
    keep, out, files = False, [], set()
    for line in preprocessed.splitlines():
        if line.startswith("#"):
            m = _LINE_MARKER.match(line)
            if m:
                fname, flags = m.group(2), m.group(3).split()
                keep = ("3" not in flags and not fname.startswith("<")
                        and not fname.startswith(NATIVE_DIR) and os.path.basename(fname) != tu_name)
                if keep:
                    files.add(fname)
            continue
        if keep:
            out.append(line)
    return "\n".join(out), files


class Analysis:
    """What the scan found: ``kernels`` [(expression, plain name)], ``needs_fibers`` {plain name: bool}."""

    def __init__(self):
        self.kernels = []
        self.functions = {}       # plain name -> identifiers used in its bodies
        self.uncertain = set()    # functions the call graph cannot follow (operators)
        self.needs_fibers = {}


def _skip_balanced(tokens, i, open_tok, close_tok):
    depth = 0
    while i < len(tokens):
        if tokens[i] == open_tok:
            depth += 1
        elif tokens[i] == close_tok:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i


def _declarator(header):
    """(name, template arguments text, is_template) of a function header's declarator."""
    toks = []
    i = 0
    is_template = False
    while i < len(header):
        t = header[i]
        if t == "__attribute__":
            i = _skip_balanced(header, i + 1, "(", ")")
            continue
        if t == "template" and i + 1 < len(header) and header[i + 1] == "<":
            is_template = True
            i = _skip_balanced(header, i + 1, "<", ">")
            continue
        toks.append(t)
        i += 1
    if "(" not in toks:
        return None, "", is_template
    p = toks.index("(")
    # name<args>( for explicit instantiations
    targs = ""
    j = p - 1
    if j >= 0 and toks[j] == ">":
        depth = 0
        k = j
        while k >= 0:
            if toks[k] == ">":
                depth += 1
            elif toks[k] == "<":
                depth -= 1
                if depth == 0:
                    break
            k -= 1
        targs = " ".join(toks[k:j + 1])
        j = k - 1
    if j < 0 or not re.match(r"[A-Za-z_]", toks[j]):
        return None, "", is_template
    name = toks[j]
    if j >= 1 and toks[j - 1] == "operator":
        name = "operator"
    return name, targs, is_template


def analyse(user_code):
    """Find kernels and decide, per kernel, whether its threads need fibers.

    A conservative scan of the preprocessed user code: top-level function
    bodies, the identifiers each uses, and a fixpoint over calls by name.  A
    kernel needs fibers when it, or anything it may call, uses a barrier or a
    warp intrinsic; when unsure (operators, code outside any function), every
    kernel gets fibers.
    """
    text = _CHAR.sub("0", _STRING.sub('""', user_code))
    tokens = _TOKEN.findall(text)
    a = Analysis()
    scopes = []          # ("ns", name) | ("class", name) | ("init", None)
    stmt = 0             # first token of the declaration being read
    i = 0
    n = len(tokens)
    loose_barrier = False
    while i < n:
        t = tokens[i]
        if t == ";":
            header = tokens[stmt:i]
            # explicit instantiation of a template kernel: template __global__ void k<float>(float*);
            if header[:1] == ["template"] and header[1:2] != ["<"] and "__gpuedu_global__" in header:
                name, targs, _ = _declarator(header[1:])
                if name:
                    a.kernels.append((_qualified(scopes, name) + targs.replace(" ", ""), name))
            if any(tok in BARRIER_NAMES for tok in header):
                loose_barrier = True
            stmt = i + 1
        elif t == "}":
            if scopes:
                scopes.pop()
            stmt = i + 1
        elif t == "{":
            header = tokens[stmt:i]
            if "namespace" in header:
                k = header.index("namespace")
                # namespace a {, namespace a::b { (C++17 nested), namespace { (anonymous)
                name = "".join(t for t in header[k + 1:] if t == "::" or re.match(r"[A-Za-z_]\w*$", t))
                scopes.append(("ns", name))
                stmt = i + 1
            elif header == ["extern", '""']:  # extern "C" { (a linkage block, not a declaration)
                scopes.append(("ns", ""))
                stmt = i + 1
            elif ")" in header and "=" not in header[:header.index("(")] if "(" in header else False:
                end = _skip_balanced(tokens, i, "{", "}")
                body = set(tok for tok in tokens[i + 1:end - 1] if tok[0].isalpha() or tok[0] == "_")
                name, _, is_template = _declarator(header)
                if name is None or name == "operator":
                    if body & BARRIER_NAMES:
                        loose_barrier = True
                else:
                    a.functions.setdefault(name, set()).update(body)
                    if "__gpuedu_global__" in header and not is_template and not any(s[0] == "class" for s in scopes):
                        a.kernels.append((_qualified(scopes, name), name))
                i = end
                stmt = i
                continue
            elif any(k in header for k in ("struct", "class", "union", "enum")) and "=" not in header:
                scopes.append(("class", ""))
                stmt = i + 1
            else:
                # an initializer list (= {...}) or something we do not model: skip it whole
                end = _skip_balanced(tokens, i, "{", "}")
                if any(tok in BARRIER_NAMES for tok in tokens[i:end]):
                    loose_barrier = True
                i = end
                continue
        i += 1
    needs = {f for f, ids in a.functions.items() if ids & BARRIER_NAMES}
    changed = True
    while changed:
        changed = False
        for f, ids in a.functions.items():
            if f not in needs and ids & needs:
                needs.add(f)
                changed = True
    for _, plain in a.kernels:
        a.needs_fibers[plain] = loose_barrier or plain in needs
    return a


def _qualified(scopes, name):
    parts = [s[1] for s in scopes if s[0] == "ns" and s[1]]
    return "::" + "::".join(parts + [name])


def _entry_points(analysis):
    lines = ["", "// ---- entry points generated by gpuedu.emulator.compiler ----",
             "static const __gpuedu::KernelInfo __gpuedu_kernels[] = {"]
    for expr, plain in analysis.kernels:
        lines.append(f'  __gpuedu::kernel_info<__gpuedu::as_kernel(&{expr})>("{plain}", '
                     f'{int(analysis.needs_fibers[plain])}),')
    lines.append("  {nullptr, nullptr, nullptr, 0, 0, nullptr, nullptr, nullptr},")
    lines.append("};")
    lines.append('extern "C" __attribute__((visibility("default"))) int gpuedu_kernel_count() '
                 f"{{ return {len(analysis.kernels)}; }}")
    lines.append('extern "C" __attribute__((visibility("default"))) const __gpuedu::KernelInfo* '
                 "gpuedu_kernel_table() { return __gpuedu_kernels; }")
    return "\n".join(lines) + "\n"


# ---- compiling ---------------------------------------------------------------------------

_C_LINKAGE_HINT = (
    "cuda_fp16.h, mma.h, cuda_pipeline.h, cooperative_groups.h and curand_kernel.h are C++ headers and cannot "
    "be included inside the extern \"C\" { } block that "
    "SourceModule wraps your code in (nvcc rejects this too). Pass no_extern_c=True to SourceModule and "
    "declare each kernel extern \"C\" __global__ void name(...) so that get_function finds it by its plain name."
)


_PTX_HINT = (
    "Inline PTX (asm(...)) is not supported by the emulator: it compiles your kernel for the CPU, where PTX "
    "instructions do not exist, so the assembler rejects them (the messages above). Write the operation in "
    "CUDA C instead (intrinsics such as __popc, __clz, __shfl_sync and atomics exist in the emulator), or run "
    "this kernel on a GPU."
)


def _clean_log(log, build_dir):
    """The compiler's output in terms of the user's file: drop build paths and include chains."""
    out = []
    for line in log.splitlines():
        if line.startswith("In file included from") or line.lstrip().startswith("from "):
            continue
        out.append(line.replace(build_dir + os.sep, ""))
    return "\n".join(out)


def _run(cmd, cwd):
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)


def _precompiled_prelude(cxx, version, folder):
    """A folder holding ``gpuedu_prelude.h.gch`` for g++, built once per prelude; None if unavailable.

    Parsing the prelude's C++ headers is most of a small module's compile time;
    g++ picks the precompiled header up by itself when its folder comes first on
    the include path (and ignores it if the flags do not match).
    """
    if "clang" in version.lower() or not re.search(r"g\+\+|gcc|GCC", version):
        return None
    key = hashlib.sha256(f"{_prelude_version()}|{_cxx_identity()}".encode()).hexdigest()[:16]
    pch_dir = os.path.join(folder, f"pch-{key}")
    gch = os.path.join(pch_dir, "gpuedu_prelude.h.gch")
    if os.path.isfile(gch):
        return pch_dir
    os.makedirs(pch_dir, exist_ok=True)
    tmp = f"{gch}.{os.getpid()}.tmp"
    cmd = [cxx] + [f for f in CXX_FLAGS if f != "-shared"] + [
        "-x", "c++-header", os.path.join(NATIVE_DIR, "gpuedu_prelude.h"), "-o", tmp]
    proc = _run(cmd, pch_dir)
    if proc.returncode != 0 or not os.path.isfile(tmp):
        if os.path.exists(tmp):
            os.remove(tmp)
        return None
    os.replace(tmp, gch)
    return pch_dir


def _host_object(cxx, folder):
    """The emulator's host side (``_native/gpuedu_host.cpp``) compiled once per prelude and compiler.

    Every kernel module links it: it keeps the system headers that signal handling
    and stack mappings need (unistd.h, signal.h, ...) out of the user's translation
    unit, so kernels may be called ``read``, ``write`` or ``signal`` as with nvcc.
    """
    return _runtime_object(cxx, folder, "gpuedu_host.cpp", "host", [], "runtime")


def _profile_object(cxx, folder):
    """The profiler's counters (``_native/gpuedu_profile.cpp``), compiled once, uninstrumented.

    A profiled module links it: the compiler's instrumentation of the module calls
    into it for every load, store and basic block of the kernels.
    """
    return _runtime_object(cxx, folder, "gpuedu_profile.cpp", "profile", ["-O3", "-DGPUEDU_PROFILE=1"], "profiler")


def _runtime_object(cxx, folder, source, prefix, extra_flags, what):
    """``_native/<source>`` compiled once per prelude and compiler into ``<folder>/<prefix>-<key>.o``."""
    key = hashlib.sha256(f"{_prelude_version()}|{_cxx_identity()}".encode()).hexdigest()[:16]
    obj = os.path.join(folder, f"{prefix}-{key}.o")
    if os.path.isfile(obj):
        return obj
    tmp = f"{obj}.{os.getpid()}.tmp.o"
    cmd = [cxx] + [f for f in CXX_FLAGS if f != "-shared"] + extra_flags + [
        "-I" + NATIVE_DIR, "-c", os.path.join(NATIVE_DIR, source), "-o", tmp]
    proc = _run(cmd, folder)
    if proc.returncode != 0 or not os.path.isfile(tmp):
        if os.path.exists(tmp):
            os.remove(tmp)
        raise CompileError(f"compiling the emulator's {what} ({source}) failed: the C++ compiler may be "
                           "too old (C++17 is needed)", command_line=" ".join(cmd), stdout=proc.stdout,
                           stderr=proc.stderr)
    os.replace(tmp, obj)  # atomic: a concurrent process sees no file or the whole file
    return obj


def profile_flags(version):
    """The host compiler's flags that make every load, store and basic block call the profiler."""
    # -fno-tree-sra keeps a float4 (an aggregate) one 16-byte access, as the GPU's vector load is one
    # instruction, instead of four scalar loads the counters would see as four requests; no
    # vectorising keeps neighbouring scalar accesses from being merged into one wider access that
    # the source never made (a wrong request count, and a false misaligned access for memcheck).
    flags = ["-DGPUEDU_PROFILE=1", "-g", "-fsanitize=thread", "-fsanitize-coverage=trace-pc", "-fno-tree-sra",
             "-fno-tree-vectorize", "-fno-tree-slp-vectorize"]
    if "clang" in version.lower():
        return flags + ["-mllvm", "-tsan-instrument-func-entry-exit=0"]
    return flags + ["--param=tsan-instrument-func-entry-exit=0"]


def _rewrite_headers(files, build_dir):
    """Rewrite the learner's headers as kernel.cu is rewritten, into the build folder.

    ``#include "x.cuh"`` looks in the including file's folder first, so kernel.cu
    (and each copied header) finds these copies: the ``__shared__`` variables they
    declare register themselves too, and the profiler counts their accesses as shared.
    """
    for k, fname in enumerate(sorted(files)):
        path = fname if os.path.isabs(fname) else os.path.join(build_dir, fname)
        target = os.path.join(build_dir, os.path.basename(path))
        if os.path.dirname(os.path.abspath(path)) == build_dir or os.path.exists(target) or not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        with open(target, "w", encoding="utf-8") as f:
            f.write(_rewrite_source(text, profile=True, tag=f"h{k}_"))


def _translation_unit(no_extern_c):
    head = '#include "gpuedu_prelude.h"\n'
    if no_extern_c:
        return head + '#include "kernel.cu"\n'
    return head + 'extern "C" {\n#include "kernel.cu"\n}\n'


def _compile_error(msg, cmd, proc, build_dir, source):
    log = _clean_log(proc.stderr, build_dir)
    if re.search(r"C linkage|conflicting declaration of C function", log) and re.search(
            r"#\s*include\s*[<\"](cuda_fp16|mma|cuda_bf16|cuda_pipeline|cooperative_groups|curand_kernel)\.h", source):
        msg = msg + "\n" + _C_LINKAGE_HINT
    code = _NOT_CODE.sub(" ", source)
    if re.search(r"\b(asm|__asm__)\s*(volatile\s*|__volatile__\s*)?\(", code) and re.search(
            r"Error:|[Aa]ssembler messages|invalid instruction|no such instruction|unknown mnemonic|"
            r"impossible constraint|invalid operand|unknown register|invalid 'asm'", log):
        msg = msg + "\n" + _PTX_HINT
    return CompileError(msg, command_line=" ".join(cmd), stdout=proc.stdout, stderr=log)


def build(source, options=None, no_extern_c=False, include_dirs=(), cache_dir_=None, profile=False):
    """Compile ``source`` (cached) and return the path of the shared library.

    ``profile=True`` builds the instrumented twin that ``gpuedu.profile()`` runs:
    the same kernels, with every load, store and basic block reported to the
    profiler's counters (``_native/gpuedu_profile.cpp``).
    """
    if not isinstance(source, str):
        raise TypeError(f"SourceModule needs the kernel source as a str, got {type(source).__name__}")
    flags = _translate_options(options, include_dirs)
    flags += os.environ.get("GPUEDU_CXXFLAGS", "").split()  # extra host-compiler flags, e.g. -O3 -march=native
    if os.environ.get("GPUEDU_FIBER_IMPL", "") == "ucontext":
        flags.append("-DGPUEDU_UCONTEXT=1")  # the portable (slower) context switch, e.g. to test it
    rewritten = _rewrite_source(source, profile)
    if profile:  # the instrumentation's flags are part of what the cached module is
        flags = flags + profile_flags(find_cxx()[1])
    folder = trusted_folder(os.path.abspath(cache_dir_)) if cache_dir_ else cache_dir()
    key = hashlib.sha256(json.dumps(
        [_prelude_version(), _cxx_identity(), flags, bool(no_extern_c), rewritten, bool(profile)]).encode()
    ).hexdigest()[:40]
    meta_path = os.path.join(folder, f"k{key}.json")
    cached = _cached_library(meta_path)
    if cached:
        return cached

    cxx, version = find_cxx()
    build_dir = tempfile.mkdtemp(prefix="gpuedu-build-", dir=folder)
    try:
        with open(os.path.join(build_dir, "kernel.cu"), "w") as f:
            f.write(rewritten)
        tu = os.path.join(build_dir, "module.cpp")
        base = [cxx] + CXX_FLAGS + ["-I" + NATIVE_DIR, "-I" + build_dir] + flags
        pch_dir = None if profile else _precompiled_prelude(cxx, version, folder)
        with open(tu, "w") as f:
            f.write(_translation_unit(no_extern_c))
        scan_cmd = [c for c in base if c != "-shared"] + ["-E", "-DGPUEDU_SCAN", "module.cpp"]
        proc = _run(scan_cmd, build_dir)
        if proc.returncode != 0:
            raise _compile_error("preprocessing the kernel source failed", scan_cmd, proc, build_dir, source)
        user_code, files = _user_code(proc.stdout, "module.cpp")
        analysis = analyse(user_code)
        if profile:
            _rewrite_headers(files, build_dir)
        with open(tu, "a") as f:
            f.write(_entry_points(analysis))
        out = os.path.join(build_dir, "module.so")
        cmd = base[:1 + len(CXX_FLAGS)] + (["-I" + pch_dir] if pch_dir else []) + base[1 + len(CXX_FLAGS):] + [
            "module.cpp", _host_object(cxx, folder), "-o", out,
            # A kernel's address must be the module's own even when the C library exports the same
            # name (a kernel called write): bind the module's references to its own definitions.
            "-Wl,-Bsymbolic"]
        if profile:
            # Compile, then link without -fsanitize: the module brings its own hooks
            # (gpuedu_profile.cpp) instead of the sanitizer's runtime library.
            cmd = [c for c in base if c != "-shared"] + ["-c", "module.cpp", "-o", "module.o"]
            proc = _run(cmd, build_dir)
            if proc.returncode == 0:
                cmd = [cxx, "-shared", "-pthread", "module.o", _host_object(cxx, folder),
                       _profile_object(cxx, folder), "-o", out, "-Wl,-Bsymbolic"]
                proc = _run(cmd, build_dir)
        else:
            proc = _run(cmd, build_dir)
        if proc.returncode != 0:
            raise _compile_error("compiling the kernel source failed (line numbers refer to your source, kernel.cu)",
                                 cmd, proc, build_dir, source)
        deps = {}
        for fname in files:
            path = fname if os.path.isabs(fname) else os.path.join(build_dir, fname)
            if os.path.basename(path) == "kernel.cu" or not os.path.isfile(path):
                continue
            with open(path, "rb") as f:
                deps[os.path.abspath(path)] = hashlib.sha256(f.read()).hexdigest()
        # The library's name carries the headers' hashes too: a process that loaded an
        # older build keeps it (dlopen returns the loaded library for a known path).
        dep_hash = hashlib.sha256(json.dumps(sorted(deps.items())).encode()).hexdigest()[:12]
        lib_path = os.path.join(folder, f"k{key}-{dep_hash}.so")
        library_digest = _file_digest(out)
        os.replace(out, lib_path)  # atomic: a concurrent process sees no file or the whole file
        tmp_meta = meta_path + f".{os.getpid()}.tmp"
        with open(tmp_meta, "w") as f:
            json.dump({"library": os.path.basename(lib_path), "library_sha256": library_digest,
                       "compiler": version, "deps": deps,
                       "kernels": [[e, p, analysis.needs_fibers[p]] for e, p in analysis.kernels]}, f)
        os.replace(tmp_meta, meta_path)
    finally:
        shutil.rmtree(build_dir, ignore_errors=True)
    return lib_path


def _cached_library(meta_path):
    """The cached library for this key, if its user headers are unchanged; else None."""
    try:
        with open(meta_path) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return None
    for path, digest in meta.get("deps", {}).items():
        try:
            with open(path, "rb") as f:
                if hashlib.sha256(f.read()).hexdigest() != digest:
                    return None
        except OSError:
            return None
    lib_path = os.path.join(os.path.dirname(meta_path), meta.get("library", ""))
    # A truncated or damaged library would crash the process that loads it (and every later one):
    # load only what hashes as it did when it was built; anything else is built again.
    if not os.path.isfile(lib_path) or meta.get("library_sha256") != _file_digest(lib_path):
        return None
    return lib_path


def _file_digest(path):
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def compile(source, nvcc="nvcc", options=None, keep=False, no_extern_c=False, arch=None, code=None,  # noqa: A001
            cache_dir=None, target="cubin", include_dirs=[]):  # noqa: B006 - PyCUDA's signature
    """Compile like ``pycuda.compiler.compile``; returns the module's binary (a shared library's bytes)."""
    path = build(source, options, no_extern_c, include_dirs, cache_dir if isinstance(cache_dir, str) else None)
    with open(path, "rb") as f:
        return f.read()


class SourceModule(Module):
    """``pycuda.compiler.SourceModule``: compile CUDA C source and load it."""

    def __init__(self, source, nvcc="nvcc", options=None, keep=False, no_extern_c=False, arch=None, code=None,
                 cache_dir=None, include_dirs=[]):  # noqa: B006 - PyCUDA's signature
        path = build(source, options, no_extern_c, include_dirs, cache_dir if isinstance(cache_dir, str) else None)
        super().__init__(path)
        self.source = source
        # What building it again, instrumented, takes (gpuedu.profile() does so when it first runs it).
        self._build_args = (source, options, no_extern_c, tuple(include_dirs or ()),
                            cache_dir if isinstance(cache_dir, str) else None)
