"""The emulator's reading of CUDA C as C++ tokens: what ``compiler.build`` needs to know before it compiles.

- ``rewrite_source``: ``extern __shared__`` arrays become the runtime's dynamic shared buffer, each static
  ``__shared__`` variable registers itself (so the runtime can fill it with garbage before each block);
  in a profiled build an atomic whose result is discarded is marked as a RED (``mark_reductions``);
  every line stays where it was, comments and strings are left alone.
- ``user_code`` keeps the preprocessed text of the user's own files; ``analyse`` finds the kernels (plain,
  namespaced, explicitly instantiated templates) and decides per kernel whether its threads need fibers
  (it, or anything it may call, reaches a barrier or a warp collective); ``entry_points`` writes the table
  the runtime reads.

A conservative scan, not a parser: when unsure (operators, code outside any function) every kernel gets fibers.
"""
import os
import re

# Intrinsics that make threads wait for one another: a kernel that reaches one
# (directly or through the functions it calls) runs its threads as fibers.
# wmma::mma_sync is one: a warp's lanes meet there to compute its product once (mma.h); so is a warp-wide PTX
# instruction (mma.sync, ldmatrix), which _ptx rewrites to __gpuedu_ptx_sync, a warpgroup one (wgmma.mma_async:
# __gpuedu_ptx_group), and an mbarrier wait, which suspends the thread until its phase completes (__gpuedu_ptx_wait).
# So are the cooperative groups' methods and functions that wait (block.sync(), tile.shfl_down(),
# cg::reduce, cg::coalesced_threads(), ...): the scan sees their names, not their groups' types,
# so a function of the same name elsewhere only costs a kernel the speed of the plain loop.
BARRIER_NAMES = frozenset("""
    __syncthreads __syncthreads_count __syncthreads_and __syncthreads_or __syncwarp
    __shfl_sync __shfl_up_sync __shfl_down_sync __shfl_xor_sync __ballot_sync __any_sync __all_sync
    __reduce_add_sync __reduce_min_sync __reduce_max_sync __reduce_and_sync __reduce_or_sync __reduce_xor_sync
    __match_any_sync __match_all_sync __gpuedu_shfl block_barrier warp_collective mma_sync __gpuedu_ptx_sync
    __gpuedu_ptx_wait __gpuedu_ptx_cluster cluster_arrive cluster_wait barrier_arrive barrier_wait
    sync shfl shfl_up shfl_down shfl_xor ballot any all match_any match_all reduce inclusive_scan exclusive_scan
    coalesced_threads
    __gpuedu_ptx_group
""".split())

_DYNAMIC_SHARED = re.compile(r"\bextern\s+__shared__\b([^;]*);")
_STATIC_SHARED = re.compile(r"\b__shared__\b([^;{}\n]*);")   # one-line declarations
_FILE_SCOPE_SHARED_DECLARATION = re.compile(r"\b__gpuedu_file_scope_shared__\b([^;{}\n]*);")
_DYNAMIC_FALLBACK = '__asm__("__gpuedu_dynamic_shared")'
_FILE_SCOPE_DYNAMIC_SHARED = re.compile(r"\bextern\s+__gpuedu_file_scope_shared__\b([^;]*);")
#: Comments, string and character literals: what rewrites and hints must not look into.
NOT_CODE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
_ATTRIBUTES = re.compile(r"__align__\s*\([^()]*\)|__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)|alignas\s*\([^()]*\)")


def _split_top_level(items, separator, opening, closing):
    """``items`` (a string's characters, or a list of tokens) split at each ``separator`` outside brackets."""
    parts, depth, start = [], 0, 0
    for k, item in enumerate(items):
        if item in opening:
            depth += 1
        elif item in closing:
            depth -= 1
        elif item == separator and depth == 0:
            parts.append(items[start:k])
            start = k + 1
    parts.append(items[start:])
    return parts


def _declared_names(declaration):
    """Names declared by ``float a[4][4], b[8]`` (the text after __shared__); [] if unsure."""
    text = _ATTRIBUTES.sub(" ", declaration)
    parts = _split_top_level(text, ",", "[(<", "])>")
    names = []
    for part in parts:
        head = re.split(r"[\[=]", part, maxsplit=1)[0]
        found = re.findall(r"[A-Za-z_]\w*", head)
        if not found or "(" in head:
            return []
        names.append(found[-1])
    return names


_UNSIZED_ARRAY = re.compile(r"^(?P<type>.*?)\b(?P<name>[A-Za-z_]\w*)\s*\[\s*\](?P<rest>(?:\s*\[[^\]]*\])*)\s*$", re.S)


def _dynamic_shared(m):
    """``extern __shared__ T name[]`` as a pointer to the runtime's dynamic shared buffer, under the same name.

    A pointer works in every scope, templates included (``SharedMemory<T>`` of the CUDA samples declares the
    array inside a member function of a class template, where an assembler label would be ignored);
    ``T name[][32]`` becomes a pointer to rows of 32. A declaration this does not recognise keeps the older
    form: the same array under the buffer's assembler name."""
    decl = _ATTRIBUTES.sub(" ", m.group(1)).strip()
    parts = _UNSIZED_ARRAY.match(decl)
    if parts and parts["type"].strip() and "," not in decl and "=" not in decl:
        t, name, rest = parts["type"].strip(), parts["name"], parts["rest"].strip()
        return f"{t} (* const {name}){rest} = reinterpret_cast<{t} (*){rest}>(__gpuedu::dynamic_shared_used());"
    return f'extern {m.group(1).strip()} __asm__("__gpuedu_dynamic_shared");'


# malloc/free (also as std:: or ::) called in an expression, not declared: the word before is no type name.
_HEAP_CALL = re.compile(r"(?<![\w.>:])(?P<qual>(?:std\s*)?::\s*)?\b(?P<fn>malloc|free)(?=\s*\()")
_NEW = re.compile(r"(?<![\w.>:])new\b(?!\s*\()")
_DELETE = re.compile(r"(?<![\w.>:])delete\b(?P<array>\s*\[\s*\])?")
_EXPRESSION_WORDS = frozenset({"return", "else", "do", "case", "throw", "co_return"})


def _before(code, start):
    """The text right before ``start``: the last non-blank character and the word that ends there ('' if none)."""
    i = start
    while i > 0 and code[i - 1].isspace():
        i -= 1
    j = i
    while j > 0 and (code[j - 1].isalnum() or code[j - 1] == "_"):
        j -= 1
    return code[i - 1:i], code[j:i]


def _declares(code, start):
    """Whether the name at ``start`` follows a type name, ``operator``, or a pointer or reference return type
    (a declaration, not a call)."""
    last, word = _before(code, start)
    if last in ("*", "&"):
        return True
    return bool(word) and not word[0].isdigit() and word not in _EXPRESSION_WORDS


def _delete_operand_end(code, i):
    """Where the operand of a delete expression that starts at ``i`` ends (a ``;``, or an unmatched ``)`` or a
    ``,`` at its own depth)."""
    depth = 0
    while i < len(code):
        ch = code[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                return i
            depth -= 1
        elif ch in ";," and depth == 0:
            return i
        i += 1
    return i


def _device_heap(code):
    """malloc, free, new and delete in kernels use the emulator's guarded device heap, not the host's."""
    def call(m):
        if _declares(code, m.start()):
            return m.group(0)
        return "__gpuedu::device_" + m.group("fn")

    code = _HEAP_CALL.sub(call, code)
    code = _NEW.sub(lambda m: m.group(0) if _declares(code, m.start()) else "new (__gpuedu::device_heap)", code)
    out, last = [], 0
    for m in _DELETE.finditer(code):
        if m.start() < last:
            continue
        if _before(code, m.start())[0] == "=" or _declares(code, m.start()):
            continue   # `= delete` (a deleted function) or `operator delete`
        end = _delete_operand_end(code, m.end())
        helper = "device_delete_array" if m.group("array") else "device_delete"
        out.append(code[last:m.start()])
        out.append(f"__gpuedu::{helper}({code[m.end():end]})")
        last = end
    out.append(code[last:])
    return "".join(out)


_ALIGNMENT = re.compile(r"(?:__align__|alignas)\s*\(\s*(\d+)\s*\)")


def _guarded_array(declaration, names):
    """``(name, type-id, alignment)`` for a static ``__shared__`` declaration of one array (``float s[32]``), which
    becomes a member of a struct followed by watched bytes, so that a block writing past its end is caught; None
    for anything else (scalars, several names, pointers to functions), which stays as written."""
    if len(names) != 1 or "=" in declaration or "(" in _ATTRIBUTES.sub(" ", declaration):
        return None
    text = _ATTRIBUTES.sub(" ", declaration)
    m = re.search(r"\b" + re.escape(names[0]) + r"\s*(\[[^;]*\])\s*$", text)
    if not m or not text[:m.start()].strip():
        return None
    type_id = f"{text[:m.start()].strip()} {m.group(1)}"
    align = max([int(a) for a in _ALIGNMENT.findall(declaration)] + [16])
    return names[0], type_id, align


# `kernel<<<grid, block[, shared[, stream]]>>>(args)` in device code (a kernel template's arguments included):
# with relocatable device code it becomes __gpuedu::device_launch(kernel, grid, block, ...)(args).
_DEVICE_LAUNCH = re.compile(r"(?P<kernel>[A-Za-z_][\w:]*(?:\s*<[^<>;(){}]*>)?)\s*<<<(?P<config>.*?)>>>", re.S)


def code_parts(source):
    """``[(offset, text)]``: the stretches of ``source`` that are code, not comments or string literals."""
    parts, last = [], 0
    for m in NOT_CODE.finditer(source):
        parts.append((last, source[last:m.start()]))
        last = m.end()
    parts.append((last, source[last:]))
    return parts


def device_launch_lines(source):
    """The lines of ``source`` that launch a kernel with ``<<<...>>>``."""
    return sorted({source.count("\n", 0, start + m.start()) + 1
                   for start, code in code_parts(source) for m in _DEVICE_LAUNCH.finditer(code)})


# Atomics with a RED form on the GPU (PTX red.global: add, min, max, inc, dec, and, or, xor);
# atomicExch and atomicCAS exist only as ATOM.
_REDUCIBLE_ATOMIC = re.compile(r"(?<![\w.:>])atomic(?:Add|Sub|Min|Max|Inc|Dec|And|Or|Xor)(?:_block|_system)?\s*\(")
_STATEMENT_HEADS = ("if", "for", "while")


def _blank(source):
    """The source with comments and literals turned into spaces (newlines kept): positions stay put."""
    return NOT_CODE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), source)


def _matching(text, start, step, pair="()"):
    """Index of the bracket matching the one at ``start`` (``step`` 1: ``pair[0]`` forwards, -1: ``pair[1]``
    back); None where there is none."""
    depth = 0
    opening, closing = (pair[0], pair[1]) if step == 1 else (pair[1], pair[0])
    k = start
    while 0 <= k < len(text):
        if text[k] == opening:
            depth += 1
        elif text[k] == closing:
            depth -= 1
            if depth == 0:
                return k
        k += step
    return None


def _is_statement(blank, start):
    """Whether the expression starting at ``start`` begins a statement: after ``;``, a brace, ``else``,
    ``do``, a control header ``if (...)``/``for (...)``/``while (...)``, or a ``(void)`` cast."""
    k = start - 1
    while k >= 0 and blank[k].isspace():
        k -= 1
    if k < 0 or blank[k] in ";{}":
        return True
    if blank[k].isalnum() or blank[k] == "_":
        word = re.search(r"\w+$", blank[:k + 1]).group(0)
        return word in ("else", "do")
    if blank[k] != ")":
        return False
    opened = _matching(blank, k, -1)
    if opened is None:
        return False
    if blank[opened + 1:k].strip() == "void":
        return True
    head = re.search(r"(\w+)\s*$", blank[:opened])
    return head is not None and head.group(1) in _STATEMENT_HEADS


def mark_reductions(source):
    """Put ``__gpuedu_prof_red(), `` before each atomic whose result its statement discards
    (``atomicAdd(&sum, v);``): nvcc compiles those to RED, a reduction that returns nothing, and the
    profiled build counts them apart from ATOM. An atomic whose value is read (assigned, compared,
    returned, passed on) stays an ATOM; so does any case the scan is unsure of. Positions on a line
    move, lines do not."""
    blank = _blank(source)
    inserts = []
    for m in _REDUCIBLE_ATOMIC.finditer(blank):
        close = _matching(blank, m.end() - 1, 1)
        if close is None:
            continue
        rest = blank[close + 1:].lstrip()
        if rest.startswith(";") and _is_statement(blank, m.start()):
            inserts.append(m.start())
    out, last = [], 0
    for position in inserts:
        out.append(source[last:position])
        out.append("__gpuedu_prof_red(), ")
        last = position
    out.append(source[last:])
    return "".join(out)


# What may stand between a function's parameter list and its body: qualifiers, a trailing return type, a
# constructor's member initialisers.
_BODY_AFTER_PARAMETERS = re.compile(r"[)\]]\s*(?:const|volatile|noexcept|override|final|mutable|&|\s)*"
                                    r"(?:->[^;{}]*|:[^;{}]*)?$")
# The marker a static __shared__ declaration outside any function gets before the rewrite (_mark_file_scope).
_FILE_SCOPE_SHARED = "__gpuedu_file_scope_shared__"
#: A module whose blocks must run on one worker thread says so with this symbol (``_module.Module.single_worker``):
#: one whose shared memory a second worker could not have its own copy of (a static ``__shared__`` variable at
#: file scope, or a declaration the rewrite did not understand, stays one variable of the module), one that launches
#: grids from device code (they run in launch order), and a source that asks for it. (A profiled build runs on
#: every worker as its plain build does: the counters take the blocks' output in the grid's order.)
SINGLE_WORKER_SYMBOL = "gpuedu_single_worker"


def _mark_file_scope(source):
    """``source`` with ``__shared__`` of the declarations outside every function body renamed to
    _FILE_SCOPE_SHARED (``extern __shared__`` too: there a pointer to the running worker's buffer could not be
    kept, so the array names the module's own buffer, and the module runs on one worker). A brace opens a function body when what precedes
    it ends a parameter list (``) const {``, ``) : x(1) {``, a lambda's ``] {``); braces inside a body are the
    body's; any other brace (a namespace, ``extern "C"``, a class, an initialiser) is not a body."""
    blank = NOT_CODE.sub(lambda m: " " * len(m.group(0)), source)
    inside, stack, marks, last = [], [], [], 0
    for k, ch in enumerate(blank):
        if ch == "{":
            in_body = bool(stack and stack[-1])
            if not in_body:
                head = blank[last:k].strip()
                in_body = bool(_BODY_AFTER_PARAMETERS.search(head)) if head else False
            stack.append(in_body)
            last = k + 1
        elif ch == "}":
            if stack:
                stack.pop()
            last = k + 1
        elif ch == ";":
            last = k + 1
        elif ch == "_" and blank.startswith("__shared__", k) and not (stack and stack[-1]):
            before = blank[max(0, k - 1):k]
            if (not before or not (before.isalnum() or before == "_")) and not re.match(r"__shared__\w",
                                                                                      blank[k:k + 11]):
                marks.append(k)
    for k in reversed(marks):
        source = source[:k] + _FILE_SCOPE_SHARED + source[k + len("__shared__"):]
    return source


# CUDA's `#pragma unroll [n]` before a loop. A profiled build asks the host compiler for the same in its own
# spelling, `#pragma GCC unroll n` (which g++ and clang++ both read), for an innermost loop: nvcc unrolls such a
# loop, so that each turn's loads and stores are instructions of their own, and a lane that skips a turn
# (`continue`) does not pair its next turn's access with the other lanes' access of this one; and it is far
# cheaper to count (one basic block for the whole loop, its accumulators in registers). A loop around other
# loops stays a loop: unrolled with them, the instrumented build of a GEMM's main loop took several times as long
# to compile. A plain build leaves every loop to the host compiler (g++ vectorises it).
_UNROLL = re.compile(r"^([ \t]*)#[ \t]*pragma[ \t]+unroll\b[ \t]*(?:\(?[ \t]*(\d+)[ \t]*\)?)?[ \t]*$", re.M)
UNROLL_ALL = 16   # what `#pragma unroll` without a count asks for: whole loops of up to 16 turns (the course's)
_LOOP_HEAD = re.compile(r"\s*(?:for|while)\s*\(")
_LOOP_INSIDE = re.compile(r"\b(?:for|while|do)\b|#")


def _innermost_loop_at(code, pos):
    """Whether a for or while loop starts at ``pos`` of ``code`` (comments and strings blanked) whose body holds
    no other loop (nor a directive)."""
    m = _LOOP_HEAD.match(code, pos)
    if not m:
        return False
    head_end = _matching(code, m.end() - 1, 1)
    if head_end is None:
        return False
    k = head_end + 1
    while k < len(code) and code[k].isspace():
        k += 1
    if k < len(code) and code[k] == "{":
        end = _matching(code, k, 1, "{}")
    else:   # one statement, to its semicolon
        end = code.find(";", k)
    return end is not None and end >= 0 and not _LOOP_INSIDE.search(code, k, end + 1)


def _gcc_unroll(source):
    """``#pragma unroll [n]`` before an innermost loop becomes ``#pragma GCC unroll n``."""
    code = _blank(source)
    out, last = [], 0
    for m in _UNROLL.finditer(code):
        if _innermost_loop_at(code, m.end()):
            out += [source[last:m.start()], f"{m.group(1)}#pragma GCC unroll {m.group(2) or UNROLL_ALL}"]
            last = m.end()
    return "".join(out) + source[last:]


def rewrite_source(source, profile=False, tag="", device_launches=False):
    """Adapt CUDA declarations to the prelude, keeping every line where it was.

    ``extern __shared__`` arrays all name the runtime's dynamic shared buffer;
    ``static __shared__`` is the same as ``__shared__``. A static ``__shared__``
    variable in a function is a slot of the running worker thread's shared memory
    (``__gpuedu::shared_var``: blocks run on several threads at once, each with its
    own shared memory), registered the first time it runs so that the runtime can
    fill shared memory with garbage before each block; a single array is followed
    by watched bytes. At file scope a variable stays one variable of the module
    (registered when the module loads), and the module says it must run on one
    worker (SINGLE_WORKER_SYMBOL). Comments and string literals are left alone.
    A profiled build registers on every execution of the declaration, so that
    every thread runs the same branches (a static guard would send only the
    first thread into the registration).
    """
    counter = [0]
    single = [False]
    named = [False]     # an array names the module's dynamic shared buffer (_DYNAMIC_FALLBACK)
    storage = "[[maybe_unused]] const bool" if profile else "static const bool"
    if profile:
        source = _gcc_unroll(mark_reductions(source))
    # (A __shared__ that a macro brings is not rewritten: it stays one variable of the module.) A source may
    # also ask for its blocks in the grid's order: `#define GPUEDU_BLOCKS_IN_ORDER` (e.g. a float sum made with
    # atomicAdd across blocks, the same to the last bit every run).
    code = NOT_CODE.sub(" ", source)
    single[0] = bool(device_launches or re.search(r"^[ \t]*#[ \t]*define\b.*\b__shared__\b", code, re.M)
                     or re.search(r"^[ \t]*#[ \t]*define[ \t]+GPUEDU_BLOCKS_IN_ORDER\b", code, re.M))
    source = _mark_file_scope(source)

    def register(m):
        names = _declared_names(m.group(1))
        guarded = _guarded_array(m.group(1), names)
        counter[0] += 1
        n = f"{tag}{counter[0]}"
        if guarded:
            name, type_id, align = guarded
            holder = f"__gpuedu::GuardedShared<{type_id}, {align}>"
            return (f"static long long __gpuedu_shared_key_{n}; "
                    f"auto& {name} = __gpuedu::shared_var<{holder}>(&__gpuedu_shared_key_{n}, \"{name}\").value;")
        if not names or "=" in m.group(1):
            single[0] = True        # one variable of the module, as written
            return m.group(0)
        slot = f"__gpuedu_shared_t_{n}"
        refs = " ".join(f"auto& {name} = __gpuedu_shared_v_{n}.{name};" for name in names)
        label = f'"{names[0]}"' if len(names) == 1 else "nullptr"    # (what messages call it: one name, or none)
        return (f"struct {slot} {{ {m.group(1)}; }}; static long long __gpuedu_shared_key_{n}; "
                f"auto& __gpuedu_shared_v_{n} = __gpuedu::shared_var<{slot}>(&__gpuedu_shared_key_{n}, {label}); "
                f"{refs}")

    def register_file_scope(m):
        single[0] = True
        names = _declared_names(m.group(1))
        guarded = _guarded_array(m.group(1), names)
        counter[0] += 1
        if guarded:
            name, type_id, align = guarded
            holder = f"__gpuedu_shared_array_{tag}{counter[0]}"
            return (f"{_FILE_SCOPE_SHARED} __gpuedu::GuardedShared<{type_id}, {align}> {holder}; "
                    f"static auto& {name} = {holder}.value; "
                    f"{storage} __gpuedu_shared_{tag}{counter[0]} = __gpuedu::register_shared((void*)&{name}, "
                    f"sizeof({name}), {holder}.guard, \"{name}\");")
        regs = []
        for name in names:
            counter[0] += 1
            regs.append(f"{storage} __gpuedu_shared_{tag}{counter[0]} = "
                        f"__gpuedu::register_shared((void*)&{name}, sizeof({name}));")
        return f"{_FILE_SCOPE_SHARED}{m.group(1)};" + " ".join(regs)

    def rewrite_code(code):
        if device_launches:
            code = _DEVICE_LAUNCH.sub(r"__gpuedu::device_launch(\g<kernel>, \g<config>)", code)
        code = re.sub(r"\bstatic(\s+)(__shared__|" + _FILE_SCOPE_SHARED + r")\b", r"\1\2", code)
        code = _FILE_SCOPE_DYNAMIC_SHARED.sub(lambda m: f'extern {m.group(1).strip()} {_DYNAMIC_FALLBACK};', code)
        code = _DYNAMIC_SHARED.sub(_dynamic_shared, code)
        if _DYNAMIC_FALLBACK in code:
            single[0] = named[0] = True
        code = _device_heap(code)
        code = _FILE_SCOPE_SHARED_DECLARATION.sub(register_file_scope, code)
        return _STATIC_SHARED.sub(register, code)

    out, last = [], 0
    for m in NOT_CODE.finditer(source):
        out.append(rewrite_code(source[last:m.start()]))
        out.append(m.group(0))
        last = m.end()
    out.append(rewrite_code(source[last:]))
    if single[0]:
        out.append(f'\n#ifndef GPUEDU_SINGLE_WORKER\n#define GPUEDU_SINGLE_WORKER\nextern "C" '
                   f'__attribute__((visibility("default"))) const int {SINGLE_WORKER_SYMBOL} = 1;\n#endif\n')
    if named[0]:
        # (The runtime then keeps worker 0's dynamic shared memory in that buffer, where the array is.)
        out.append('\n#ifndef GPUEDU_DYNAMIC_NAMED\n#define GPUEDU_DYNAMIC_NAMED\n[[maybe_unused]] static const bool '
                   '__gpuedu_dynamic_named = (__gpuedu::dynamic_named = true);\n#endif\n')
    return "".join(out)


# The C++ library's host-only parts: containers that allocate, strings, streams, threads, smart pointers,
# std::function, random engines. nvcc refuses them in device code ("calling a __host__ function from a
# __global__ function is not allowed"); the emulator's C++ compiler would take them, so they are looked for.
HOST_LIBRARY = frozenset("""
    vector string wstring map multimap unordered_map unordered_multimap set multiset unordered_set
    unordered_multiset list forward_list deque queue stack priority_queue
    cout cerr clog cin endl ostream istream iostream stringstream ostringstream istringstream ifstream ofstream
    fstream getline to_string stoi stol stoul stoll stoull stof stod
    thread mutex lock_guard unique_lock scoped_lock condition_variable async future promise
    function shared_ptr unique_ptr weak_ptr make_shared make_unique
    random_device mt19937 mt19937_64 default_random_engine
""".split())
_STD_NAME = re.compile(r"\bstd\s*::\s*([A-Za-z_]\w*)")


def host_library_uses(source):
    """``[(line, "std::vector"), ...]``: the host-only library names the source's code (not its comments or
    strings) uses."""
    found = []
    for start, code in code_parts(source):
        for m in _STD_NAME.finditer(code):
            if m.group(1) in HOST_LIBRARY:
                found.append((source.count("\n", 0, start + m.start()) + 1, f"std::{m.group(1)}"))
    return found


_LINE_MARKER = re.compile(r'^# (\d+) "((?:[^"\\]|\\.)*)"(.*)$')
_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"')
_CHAR = re.compile(r"'(?:\\.|[^'\\\n])*'")
_TOKEN = re.compile(r'[A-Za-z_]\w*|::|""|\S')  # "" is a string literal after _STRING blanked it


def user_code(preprocessed, tu_name, skip_dir):
    """The preprocessed text of the user's own files (not ``tu_name``, nor headers under ``skip_dir``),
    and the header files it came from."""
    keep, out, files = False, [], set()
    for line in preprocessed.splitlines():
        if line.startswith("#"):
            m = _LINE_MARKER.match(line)
            if m:
                fname, flags = m.group(2), m.group(3).split()
                keep = ("3" not in flags and not fname.startswith("<")
                        and not fname.startswith(skip_dir) and os.path.basename(fname) != tu_name)
                if keep:
                    files.add(fname)
            continue
        if keep:
            out.append(line)
    return "\n".join(out), files


class Analysis:
    """What the scan found: ``kernels`` [(expression, plain name)], ``needs_fibers`` {plain name: bool},
    ``variables`` [(qualified name, plain name)] of the module's ``__device__`` variables at namespace scope (not
    ``__constant__``, ``extern`` or class members)."""

    def __init__(self):
        self.kernels = []
        self.variables = []
        self.parameters = []      # per kernel: its parameter list's text (to tell overloads apart)
        self.functions = {}       # plain name -> identifiers used in its bodies
        self.uncertain = set()    # functions the call graph cannot follow (operators)
        self.needs_fibers = {}
        self.cluster_dims = {}     # {plain name: [x, y, z]}: a kernel's __cluster_dims__, as C++ expressions


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
        if t in ("__attribute__", "__gpuedu_cluster_dims__"):
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
                    a.parameters.append(_parameters(header))
            if any(tok in BARRIER_NAMES for tok in header):
                loose_barrier = True
            if ("__gpuedu_device__" in header and "__gpuedu_constant__" not in header
                    and not any(s[0] == "class" for s in scopes)
                    and not {"extern", "template", "typedef", "using", "__gpuedu_global__"} & set(header)):
                words = [tok for tok in header if tok not in ("__gpuedu_device__", "static", "__managed__")]
                for name in _declared_names(" ".join(words)):
                    a.variables.append((_qualified(scopes, name), name))
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
                    if "__gpuedu_global__" in header and "__gpuedu_cluster_dims__" in header:
                        a.cluster_dims[name] = _cluster_dims(header, name)
                    if "__gpuedu_global__" in header and not is_template and not any(s[0] == "class" for s in scopes):
                        a.kernels.append((_qualified(scopes, name), name))
                        a.parameters.append(_parameters(header))
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


def _cluster_dims(header, name):
    """The C++ expressions of a kernel's ``__cluster_dims__(x[, y[, z]])`` (its scan marker's arguments), three."""
    k = header.index("__gpuedu_cluster_dims__")
    end = _skip_balanced(header, k + 1, "(", ")") - 1
    def text(tokens):   # (the scan's tokens split numbers into digits: glue them back, words apart)
        out = ""
        for t in tokens:
            out += (" " if out and (out[-1].isalnum() or out[-1] == "_") and (t[0].isalpha() or t[0] == "_")
                    else "") + t
        return out
    args = [text(part) for part in _split_top_level(header[k + 2:end], ",", "(<[", ")>]")]
    if not 1 <= len(args) <= 3 or not all(args):
        raise ValueError(f"__cluster_dims__ of kernel '{name}' takes 1 to 3 dimensions, got "
                         f"({' '.join(header[k + 2:end])})")
    return args + ["1"] * (3 - len(args))


def _parameters(header):
    """The text of a function header's parameter list, default arguments left out: what a function pointer
    type needs to pick one overload."""
    toks = [t for t in header if t != "__gpuedu_global__"]
    if "(" not in toks:
        return ""
    start = toks.index("(")
    end = _skip_balanced(toks, start, "(", ")") - 1
    params, depth, skipping = [], 0, False
    for t in toks[start + 1:end]:
        if t in "(<[":
            depth += 1
        elif t in ")>]":
            depth -= 1
        elif t == "," and depth == 0:
            skipping = False
        elif t == "=" and depth == 0:
            skipping = True
        if not skipping:
            params.append(t)
    return " ".join(params)


def _qualified(scopes, name):
    parts = [s[1] for s in scopes if s[0] == "ns" and s[1]]
    return "::" + "::".join(parts + [name])


def variable_table(analysis):
    """The profiled build's table of the module's ``__device__`` variables (address, bytes, name), which the
    counters count as global memory (``_instrument.Twin``): a static one too, which the module exports no symbol
    for."""
    entries = [(f"(const void*)__builtin_addressof({expr})", f"sizeof({expr})", f'"{plain}"')
               for expr, plain in analysis.variables]
    column = lambda k, end: ", ".join([e[k] for e in entries] + [end])
    visible = 'extern "C" __attribute__((visibility("default")))'
    return (f"\n// ---- the module's __device__ variables (_scanner.variable_table) ----\n"
            f"{visible} const void* const gpuedu_prof_variable_address[] = {{{column(0, 'nullptr')}}};\n"
            f"{visible} const unsigned long long gpuedu_prof_variable_bytes[] = {{{column(1, '0')}}};\n"
            f"{visible} const char* const gpuedu_prof_variable_name[] = {{{column(2, 'nullptr')}}};\n"
            f"{visible} int gpuedu_prof_variable_count() {{ return {len(entries)}; }}\n")


def entry_points(analysis):
    lines = ["", "// ---- entry points generated by gpuedu.emulator (_scanner.entry_points) ----",
             "static const __gpuedu::KernelInfo __gpuedu_kernels[] = {"]
    count = {}
    for expr, _ in analysis.kernels:
        count[expr] = count.get(expr, 0) + 1
    for (expr, plain), params in zip(analysis.kernels, analysis.parameters):
        # an overloaded kernel (C++ linkage) is picked by its parameter types
        target = f"&{expr}" if count[expr] == 1 else f"static_cast<void (*)({params})>(&{expr})"
        cluster = "".join(f", {d}" for d in analysis.cluster_dims.get(plain, ()))
        lines.append(f'  __gpuedu::kernel_info<__gpuedu::as_kernel({target})>("{plain}", '
                     f'{int(analysis.needs_fibers[plain])}{cluster}),')
    lines.append("  {nullptr, nullptr, nullptr, 0, 0, nullptr, nullptr, nullptr},")
    lines.append("};")
    lines.append('extern "C" GPUEDU_HIDDEN const __gpuedu::KernelInfo* __gpuedu_kernel_for(const void* address) {')
    lines.append("  for (const auto& k : __gpuedu_kernels) if (k.address && k.address == address) return &k;")
    lines.append("  return nullptr;")
    lines.append("}")
    lines.append('extern "C" __attribute__((visibility("default"))) int gpuedu_kernel_count() '
                 f"{{ return {len(analysis.kernels)}; }}")
    lines.append('extern "C" __attribute__((visibility("default"))) const __gpuedu::KernelInfo* '
                 "gpuedu_kernel_table() { return __gpuedu_kernels; }")
    return "\n".join(lines) + "\n"


# ---- local memory: the arrays nvcc keeps in a thread's local memory ------------------------------------------
# nvcc keeps a thread's array in registers when every index it is used with is a constant once the loops around
# it are unrolled; an array indexed at run time goes to local memory (DRAM, through L1 and L2), where every access
# is a load or store instruction. The host compiler's choice differs (g++ -O2 unrolls little, the profiled clang++
# build nothing), and neither compiler's -fsanitize=thread reports accesses to a local array whose address never
# leaves its function. So a profiled build decides as nvcc does, from the source, and passes the address of each
# array nvcc would keep in local memory to __gpuedu_prof_local() right after its declaration: the host compiler then
# keeps that array in memory and reports all its accesses, and the counters count them as local. The rule:
# - a loop is unrolled (its variable a constant in each copy of its body) when its trip count is a constant and
#   `#pragma unroll` without a count (or with one at least the trip count) stands before it, or when it has no
#   pragma and its body's turns, the turns of the constant loops inside it included, number at most UNROLLED_TURNS
#   (nvcc 13 for sm_90 kept `float s[24]` filled by 24 turns of a 16-turn dot product in registers, and put
#   `float s[32]` with 32 turns in local memory; a single loop of 300 turns was unrolled, one of 512 was not);
#   `#pragma unroll 1` keeps a loop;
# - an index is a constant when it is made of literals, unrolled loops' variables, names that are not variables
#   of the function (template parameters, enumerators, `T::N`, constants of the file) and the function's scalars
#   initialised from constants and never changed; a parameter, threadIdx and the like, and an element of another
#   array are not.
# An array whose only indexed uses are in another function it is passed to is judged by its own uses (none): kept
# in registers, as nvcc keeps the course's accumulators passed to inlined helpers.
UNROLLED_TURNS = 400
_BUILTIN_VARIABLES = frozenset({"threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize"})
_KEYWORDS = frozenset("""
    return else case goto delete new throw sizeof alignof typeid co_return co_yield if while for do switch
    default break continue operator template typename
""".split())
_LOCAL_TOKEN = re.compile(r'#[^\n]*|[A-Za-z_]\w*|\d[\w.]*(?:[eEpP][+-]\d+)?|\.\d+\w*|""|::|->|\+\+|--|<<=|>>=|'
                          r'<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^]=|\S')
_TYPE_PUNCTUATION = frozenset({"::", "<", ">", ",", "*", "&", "&&"})   # what a declaration's type may hold
_ASSIGNING = frozenset({"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>=", "++", "--"})


def _line_tokens(preprocessed, tu_name, skip_dir):
    """``[(token, file, line)]`` of the user's own files (those ``user_code`` keeps), a ``#pragma`` line one token."""
    keep, fname, number, out = False, "", 0, []
    for text in preprocessed.splitlines():
        if text.startswith("#"):
            m = _LINE_MARKER.match(text)
            if m:
                fname, number, flags = m.group(2), int(m.group(1)) - 1, m.group(3).split()
                keep = ("3" not in flags and not fname.startswith("<")
                        and not fname.startswith(skip_dir) and os.path.basename(fname) != tu_name)
                continue
        number += 1
        if not keep:
            continue
        if text.lstrip().startswith("#"):
            if re.match(r"\s*#\s*pragma\b", text):
                out.append((" ".join(text.split()), fname, number))
            continue
        code = _CHAR.sub("0", _STRING.sub('""', text))
        out.extend((t, fname, number) for t in _LOCAL_TOKEN.findall(code))
    return out


def _close(tokens, i, open_tok, close_tok):
    """The index of the token that closes the bracket at ``i`` (len(tokens) if none)."""
    depth = 0
    for k in range(i, len(tokens)):
        if tokens[k] == open_tok:
            depth += 1
        elif tokens[k] == close_tok:
            depth -= 1
            if depth == 0:
                return k
    return len(tokens)


def _statement_end(tokens, i):
    """The index of the last token of the statement that starts at ``i``."""
    n = len(tokens)
    while i < n and tokens[i].startswith("#"):
        i += 1
    if i >= n:
        return n - 1
    t = tokens[i]
    if t == "{":
        return _close(tokens, i, "{", "}")
    if t in ("for", "while", "switch") and i + 1 < n and tokens[i + 1] == "(":
        return _statement_end(tokens, _close(tokens, i + 1, "(", ")") + 1)
    if t == "if" and i + 1 < n:
        k = i + 1 + (tokens[i + 1] == "constexpr")
        end = _statement_end(tokens, _close(tokens, k, "(", ")") + 1)
        if end + 1 < n and tokens[end + 1] == "else":
            end = _statement_end(tokens, end + 2)
        return end
    if t == "do":
        end = _statement_end(tokens, i + 1)          # the body, then `while (...);`
        return _statement_end(tokens, end + 1)
    depth = 0
    for k in range(i, n):
        if tokens[k] in "([{":
            depth += 1
        elif tokens[k] in ")]}":
            depth -= 1
            if depth < 0:
                return k - 1
        elif tokens[k] == ";" and depth == 0:
            return k
    return n - 1


def _integer(tokens):
    """The value of a constant integer expression of literals, or None."""
    text = " ".join(tokens)
    text = re.sub(r"\b(\d+)[uUlL]+\b", r"\1", text)
    if not text or not re.fullmatch(r"[\d\s()+\-*/%<>]+", text) or "**" in text.replace(" ", ""):
        return None
    try:
        return int(eval(text.replace("/", "//"), {"__builtins__": {}}))   # digits and operators only
    except Exception:
        return None


class _Loop:
    def __init__(self, start, end, var, trip, pragma):
        self.start, self.end, self.var, self.trip, self.pragma = start, end, var, trip, pragma
        self.unrolled = False


def _loops(tokens, lo, hi, constant):
    """The for loops of tokens[lo:hi], with each one's variable and trip count (an int; 0: a constant the scan
    cannot evaluate; None: not a constant) and its unroll pragma's count (None: no pragma, 0: no count).
    ``constant(expression, at)`` says whether a header's part is a constant."""
    loops = []
    for i in range(lo, hi):
        if tokens[i] != "for" or i + 1 >= hi or tokens[i + 1] != "(":
            continue
        close = _close(tokens, i + 1, "(", ")")
        header = tokens[i + 2:close]
        parts = _split_top_level(header, ";", "([{", ")]}")
        var, trip, first = None, None, []
        if len(parts) == 3 and "=" in parts[0]:
            eq = parts[0].index("=")
            var = parts[0][eq - 1] if eq else None
            first, step = parts[0][eq + 1:], parts[2]
            # `j < 8 && j < n` stops after 8 turns at most: nvcc unrolls it, each turn guarded by the rest
            conjuncts, depth, begin = [], 0, 0
            for k, t in enumerate(parts[1] + ["&&"]):
                if t in "([{":
                    depth += 1
                elif t in ")]}":
                    depth -= 1
                elif t == "&&" and depth == 0:
                    conjuncts.append(parts[1][begin:k])
                    begin = k + 1
            cond = next((c for c in conjuncts if len(c) >= 3 and c[0] == var
                         and c[1] in ("<", "<=", ">", ">=", "!=")), [])
            if var and cond:
                a, b = _integer(first), _integer(cond[2:])
                if a is None and b is None and cond[2:2 + len(first)] == first and cond[2 + len(first):3 + len(first)] == ["+"]:
                    a, b = 0, _integer(cond[3 + len(first):])   # from x to x + C: C turns, whatever x is
                if step in ([var, "++"], ["++", var]):
                    stride = 1
                elif step in ([var, "--"], ["--", var]):
                    stride = -1
                elif len(step) >= 3 and step[0] == var and step[1] in ("+=", "-="):
                    stride = _integer(step[2:])
                    stride = None if stride is None else (stride if step[1] == "+=" else -stride)
                else:
                    stride = None
                if stride and a is not None and b is not None:
                    span = {"<": b - a, "<=": b - a + 1, ">": a - b, ">=": a - b + 1, "!=": abs(b - a)}[cond[1]]
                    trip = max(0, -(-span // abs(stride))) if span * stride > 0 or cond[1] == "!=" else 0
                    trip = max(trip, 1)
                elif stride and all(constant(part, i) for part in (first, cond[2:], step[2:])):
                    trip = 0
        pragma = None
        if i > lo and tokens[i - 1].startswith("#"):
            m = re.match(r"#\s*pragma\s+(?:GCC\s+)?unroll\b\s*\(?\s*(\d*)", tokens[i - 1])
            if m:
                count = int(m.group(1)) if m.group(1) else 0
                # (a profiled build wrote CUDA's `#pragma unroll` as `#pragma GCC unroll UNROLL_ALL`: _gcc_unroll)
                pragma = 0 if "GCC" in tokens[i - 1] and count == UNROLL_ALL else count
        loop = _Loop(i, _statement_end(tokens, close + 1), var, trip, pragma)
        loop.first = first
        loops.append(loop)
    return loops


def _decide_unrolled(loops):
    """Set each loop's ``unrolled``: see the rule above."""
    def turns(loop):
        if loop.trip is None:
            return None
        inner = [other for other in loops if loop.start < other.start <= loop.end
                 and not any(loop.start < mid.start < other.start <= mid.end for mid in loops)]
        total = 0
        for other in inner:
            t = turns(other)
            if t is None:
                return None
            total += t
        return max(loop.trip, 1) * max(total, 1)
    for loop in loops:
        if loop.trip is None or loop.pragma == 1:
            loop.unrolled = False
        elif loop.pragma is not None:
            loop.unrolled = loop.pragma == 0 or not loop.trip or loop.pragma >= loop.trip
        else:
            t = turns(loop)
            loop.unrolled = t is not None and t <= UNROLLED_TURNS


class _Variable:
    def __init__(self, name, at, array, const, parameter=False, init=None, static=False):
        self.name, self.at, self.array, self.const, self.parameter = name, at, array, const, parameter
        self.init, self.static, self.changed = init, static, False


def _opener(tokens, close):
    """The token before the ``(`` that the ``)`` at ``close`` closes ('' if none)."""
    depth = 0
    for k in range(close, -1, -1):
        if tokens[k] == ")":
            depth += 1
        elif tokens[k] == "(":
            depth -= 1
            if depth == 0:
                return tokens[k - 1] if k else ""
    return ""


def _variables_of(tokens, params, lo, hi):
    """The function's variables: its parameters (``params``: the tokens of its parameter list) and what its body
    tokens[lo:hi] declares, in order."""
    found = []
    depth, start = 0, 0
    plist = params + [","]
    for k, t in enumerate(plist):
        if t in "(<[":
            depth += 1
        elif t in ")>]":
            depth -= 1
        elif t == "," and depth == 0:
            part = plist[start:k]
            if "=" in part:
                part = part[:part.index("=")]
            if "[" in part:
                part = part[:part.index("[")]
            names = [w for w in part if w[0].isalpha() or w[0] == "_"]
            if len(names) >= 2:
                found.append(_Variable(names[-1], -1, False, False, parameter=True))
            start = k + 1
    i = lo
    while i < hi:
        t = tokens[i]
        if t in ("struct", "class", "union", "enum"):   # a type defined in the body: its members are no variables
            k = i + 1
            while k < hi and tokens[k] not in ("{", ";"):
                k += 1
            if k < hi and tokens[k] == "{":
                i = _close(tokens, k, "{", "}") + 1
                continue
        if (t[0].isalpha() or t[0] == "_") and t not in _KEYWORDS and i + 1 < hi and i > lo:
            before, after = tokens[i - 1], tokens[i + 1]
            typed = ((before[0].isalpha() or before[0] == "_") and before not in _KEYWORDS) or before in ("*", "&", ">")
            if typed and after in ("=", ";", ",", "[", "{", ":") and not (after == ":" and tokens[i - 1] == "case"):
                stmt = i - 1
                while stmt > lo and tokens[stmt - 1] not in (";", "{", "}", ")") and not tokens[stmt - 1].startswith("#"):
                    stmt -= 1
                words = set(tokens[stmt:i])
                head = tokens[stmt]
                after_header = tokens[stmt - 1] != ")" or _opener(tokens, stmt - 1) in ("for", "if", "while", "switch")
                if not (after_header and (head[0].isalpha() or head[0] == "_") and head not in _KEYWORDS
                        and all((w[0].isalnum() or w[0] == "_") and w not in _KEYWORDS or w in _TYPE_PUNCTUATION
                                for w in words)):
                    i += 1
                    continue
                end = _statement_end(tokens, stmt)
                const = bool({"const", "constexpr"} & words)
                static = bool({"static", "extern"} & words)
                k = i
                while k <= end:   # this declarator, then `, next` at depth 0
                    name = tokens[k]
                    j = k + 1
                    array = j <= end and tokens[j] == "["
                    while j <= end and tokens[j] == "[":
                        j = _close(tokens, j, "[", "]") + 1
                    init = None
                    stop = j
                    d = 0
                    while stop <= end and not (d == 0 and tokens[stop] in (",", ";")):
                        if tokens[stop] in "([{":
                            d += 1
                        elif tokens[stop] in ")]}":
                            d -= 1
                        stop += 1
                    if j <= end and tokens[j] in ("=", "{"):
                        init = tokens[j + 1 if tokens[j] == "=" else j:stop]
                    found.append(_Variable(name, k, array, const, init=init, static=static))
                    if stop <= end and tokens[stop] == "," and stop + 1 <= end and (
                            tokens[stop + 1][0].isalpha() or tokens[stop + 1][0] == "_"):
                        k = stop + 1
                        while k <= end and tokens[k] in ("*", "&"):
                            k += 1
                        if k <= end and (tokens[k][0].isalpha() or tokens[k][0] == "_"):
                            continue
                    break
                i = k + 1
                continue
        i += 1
    return found


def _judge_function(tokens, params, lo, hi, runtime_names):
    """The local arrays of the function whose body is tokens[lo:hi]: ``[(variable, first runtime index)]``."""
    variables = _variables_of(tokens, params, lo, hi)
    by_name = {}
    for v in variables:
        by_name.setdefault(v.name, []).append(v)
    for i in range(lo, hi):      # scalars changed after their declaration
        t = tokens[i]
        if t in by_name and tokens[i - 1] not in (".", "->", "::"):
            if (i + 1 < hi and tokens[i + 1] in _ASSIGNING) or tokens[i - 1] in ("++", "--", "&"):
                for v in by_name[t]:
                    if v.at < i:
                        v.changed = True

    def declared(name, at):
        best = None
        for v in by_name.get(name, ()):
            if v.at <= at:
                best = v
        return best

    loops = []
    loop_names = set()
    memo = {}

    def constant(expr, at, depth=0):
        """Whether ``expr`` (at token ``at``) is a constant once the unrolled loops are unrolled (before they are
        known, ``loops`` is empty and a loop's variable is no constant)."""
        if depth > 20:
            return False
        for k, t in enumerate(expr):
            if not (t[0].isalpha() or t[0] == "_") or t in _KEYWORDS:
                continue
            prev = expr[k - 1] if k else ""
            nxt = expr[k + 1] if k + 1 < len(expr) else ""
            if prev in (".", "->") or nxt == "(" or prev == "::" or nxt == "::":
                continue
            if t in _BUILTIN_VARIABLES:
                return False
            loop = None
            for candidate in loops:
                if candidate.var == t and candidate.start <= at <= candidate.end:
                    loop = candidate   # (the innermost: loops are in order of their start)
            if loop is not None:   # a constant in each unrolled copy, if it starts from one
                if not loop.unrolled or not constant(loop.first, loop.start - 1, depth + 1):
                    return False
                continue
            if not loops and t in loop_names:
                return False
            v = declared(t, at)
            if v is None:
                if t in runtime_names:
                    return False
                continue
            if v.parameter or v.array or v.init is None or v.changed:
                return False
            key = id(v)
            if key not in memo:
                memo[key] = False
                memo[key] = constant(v.init, v.at, depth + 1)
            if not memo[key]:
                return False
        return True

    found_loops = _loops(tokens, lo, hi, lambda expr, at: False)   # (their variables first)
    loop_names.update(loop.var for loop in found_loops if loop.var)
    found_loops = _loops(tokens, lo, hi, constant)
    _decide_unrolled(found_loops)
    loops.extend(found_loops)
    memo.clear()

    local = []
    for v in variables:
        if not v.array or v.static or v.parameter:
            continue
        for i in range(v.at + 1, hi):
            if tokens[i] != v.name or tokens[i - 1] in (".", "->", "::") or declared(v.name, i) is not v:
                continue
            j = i + 1
            found = None
            while j < hi and tokens[j] == "[":
                close = _close(tokens, j, "[", "]")
                if not constant(tokens[j + 1:close], i):
                    found = i
                    break
                j = close + 1
            if found is not None:
                local.append((v, found))
                break
    return local


def local_arrays(preprocessed, tu_name, skip_dir, analysis=None):
    """The arrays nvcc keeps in local memory (the rule above), as ``[(file, line, end line, name)]``: the lines of
    each one's name in its declaration and of the ``;`` that ends it, in the user's files of the preprocessed text."""
    triples = _line_tokens(preprocessed, tu_name, skip_dir)
    tokens = [t for t, _, _ in triples]
    runtime_names = {plain for _, plain in analysis.variables} if analysis is not None else set()
    found = []
    i, n, stmt = 0, len(tokens), 0
    while i < n:
        t = tokens[i]
        if t in (";", "}") or t.startswith("#"):
            stmt = i + 1
        elif t == "{":
            header = [h for h in tokens[stmt:i] if not h.startswith("#")]
            if ")" in header and "(" in header and "=" not in header[:header.index("(")]:
                end = _close(tokens, i, "{", "}")
                open_at = header.index("(")
                params = header[open_at + 1:_skip_balanced(header, open_at, "(", ")") - 1]
                for v, _ in _judge_function(tokens, params, i + 1, end, runtime_names):
                    close = _statement_end(tokens, v.at)
                    while close > v.at and tokens[close] != ";":
                        close -= 1
                    if triples[close][1] == triples[v.at][1]:
                        found.append((triples[v.at][1], triples[v.at][2], triples[close][2], v.name))
                i = end + 1
                stmt = i
                continue
            stmt = i + 1
        i += 1
    return found


LOCAL_PREFIX = "__gpuedu_local_"


def mark_local_arrays(text, marks):
    """``text`` (a file's source) with each local array that ``marks`` names as ``(line, end line, name)`` declared
    as ``__gpuedu_local_<name>``, and ``<name>`` a reference to it through ``__gpuedu::prof::local`` right after the
    ``;`` that ends the declaration (gpuedu_profile.h): every line stays where it was. A declaration whose lines do
    not show it (one a macro makes) is left alone."""
    lines = text.split("\n")
    blank = _blank(text).split("\n")
    edits = {}   # line -> [(position, characters to remove, text to put there)]
    for line, end_line, name in dict.fromkeys(marks):
        if not (0 < line <= end_line <= len(lines)) or end_line - line > 8:
            continue
        m = re.search(r"(?<![\w.>:])" + re.escape(name) + r"(?=\s*\[)", blank[line - 1])
        if not m:
            continue
        start, depth, at = m.end(), 0, None
        for k in range(line, end_line + 1):
            code = blank[k - 1]
            for c in range(start if k == line else 0, len(code)):
                ch = code[c]
                if ch in "([{":
                    depth += 1
                elif ch in ")]}":
                    depth -= 1
                elif ch == ";" and depth <= 0:
                    at = (k, c + 1)
                    break
            if at:
                break
        if not at or at[0] != end_line:
            continue
        edits.setdefault(line, []).append((m.start(), len(name), LOCAL_PREFIX + name))
        edits.setdefault(end_line, []).append(
            (at[1], 0, f" auto& {name} = *::__gpuedu::prof::local(__builtin_addressof({LOCAL_PREFIX}{name}));"))
    for line, changes in edits.items():
        source = lines[line - 1]
        for position, removed, inserted in sorted(changes, reverse=True):
            source = source[:position] + inserted + source[position + removed:]
        lines[line - 1] = source
    return "\n".join(lines)


def mark_local_array_files(found, build_dir):
    """Mark the local arrays ``found`` ([(file, line, end line, name)], local_arrays) in the build folder's copies of
    the files that declare them (kernel.cu, and the headers the build copied there); returns {path: its text
    before}, to put back if the marked source does not compile."""
    # A `#line N "name"` in kernel.cu (the exercises' answers start with one) names lines of kernel.cu by another
    # file's numbers: those are kernel.cu's lines after the directive.
    kernel_cu = os.path.join(build_dir, "kernel.cu")
    renamed = []   # (line of kernel.cu after the directive, N, name)
    with open(kernel_cu, encoding="utf-8", errors="replace") as f:
        for number, text in enumerate(f.read().split("\n"), 1):
            m = re.match(r'\s*#\s*line\s+(\d+)(?:\s+"([^"]*)")?', text)
            if m:
                renamed.append((number + 1, int(m.group(1)), m.group(2)))
    by_file = {}
    for fname, line, end_line, name in found:
        path = fname if os.path.isabs(fname) else os.path.join(build_dir, fname)
        if not os.path.isfile(path) or os.path.dirname(os.path.abspath(path)) != build_dir:
            for after, first, directive_name in reversed(renamed):
                if directive_name in (None, fname) and line >= first:
                    path, line, end_line = kernel_cu, after + line - first, after + end_line - first
                    break
            else:
                path = os.path.join(build_dir, os.path.basename(path))
        by_file.setdefault(path, []).append((line, end_line, name))
    originals = {}
    for path, marks in by_file.items():
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        marked = mark_local_arrays(text, marks)
        if marked != text:
            originals[path] = text
            with open(path, "w", encoding="utf-8") as f:
                f.write(marked)
    return originals
