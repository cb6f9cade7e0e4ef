"""The inline PTX the emulator runs: one table of instructions, and the rewrite of ``asm()`` statements into calls
of the runtime (``_native/gpuedu_ptx.h``), which gives each the PTX ISA's semantics.

A kernel's ``asm("template" : outputs : inputs : clobbers)`` statement is read whole: its template (one or
more instructions, each ending in ``;``) and its operands with their constraints (``r`` 32 bits, ``h`` 16,
``f`` a float, ``l`` 64 bits, ``d`` a double, ``n`` an immediate; ``=`` written, ``+`` read and written).
Each instruction must be one of ``INSTRUCTIONS``, for the module's architecture (``arch=`` or ``-arch``, sm_80
by default, the emulated device's), with operands of the kinds and sizes the instruction takes. Anything else
is refused before compiling, naming the instruction and what is supported, as ptxas refuses what it does not
know. An ``asm`` statement with an empty template (a compiler barrier, ``asm volatile("" ::: "memory")``) is
left to the C++ compiler.

Predicates and ``{ }`` scopes are not taken, but for an mbarrier wait, whose result is a predicate that inline asm
cannot bind to a C++ value: public code keeps it inside a ``{ .reg .pred P; ... }`` scope and reads it out with
``selp``, or loops on it until the phase completes (``WAIT_IDIOMS``). Those two scopes are recognised whole.

A profiled build (``rewrite(..., profile=True)``, the twin ``gpuedu.profile()`` runs) adds, at each statement's
own site, a call of the counters' hook for each memory access an instruction makes (``_PROFILED``): an
ldmatrix's rows (LDSM), a cp.async's global read and shared write (LDGSTS). Each statement is then an instruction
of its own, with every lane's address, as an atomic is (``gpuedu_profile.h``); racecheck and memcheck see the
accesses too. mma.sync needs none: the warp's meeting tells the counters once per warp.

Hopper's warpgroup MMA (``wgmma``, for sm_90a alone, as ptxas has it; refused for sm_90 and below with ptxas's
reason): ``wgmma.mma_async`` m64nNk16 with .f32 accumulators and .f16 or .bf16 inputs, A from shared memory (a
matrix descriptor) or registers, B from shared memory, runs as a meeting of the warpgroup's 128 threads
(``gpuedu_wgmma.h``); its immediates (scale-d, imm-scale-a/b, imm-trans-a/b, and wait_group's and setmaxnreg's
counts) are literals or "n" operands, read here when their expression is a number, and when the instruction runs
when it is a constant only nvcc knows (a template parameter), checked there as ptxas checks the instance; scale-d
may also be a predicate set from a register in the statement, as public kernels write it
(``{ .reg .pred p; setp.ne.b32 p, %x, 0; wgmma.mma_async ... p, ...; }``). ``wgmma.fence``, ``commit_group``,
``wait_group`` and ``fence.proxy.async`` are checked here and run nothing: the product is in the accumulators when
mma_async returns, so a missing wait does not show in the values (``gpuedu_wgmma.h`` says more).

The Tensor Memory Accelerator's copies (``cp.async.bulk.tensor``, sm_90: a load of a tensor map's box into shared
memory that completes its bytes on an mbarrier, a store of a box back; ``gpuedu_tma.h``) take the map's address and
the box's coordinates as ``[%map, {%c0, ...}]``; the bulk group's commit and wait and ``prefetch.tensormap`` have
nothing to run.

Thread-block clusters (sm_90; ``gpuedu_cluster.h``): the cluster's special registers, read with ``mov``
(``%cluster_ctarank``, ``%clusterid.x``, ...); ``mapa``, which gives another block's address of a shared variable
(shared::cluster, or generic with ``mapa.u64``); ``ld``/``st.shared::cluster`` through such an address;
``barrier.cluster.arrive``/``.wait``, which suspend the thread as ``__syncthreads`` does, for every block of the
cluster; ``mbarrier.arrive`` on another block's mbarrier (``.shared::cluster``); and the TMA load's
``.multicast::cluster``, which lands one box in each block of a 16-bit mask.

Adding an instruction is a row of ``INSTRUCTIONS`` and its case in ``gpuedu_ptx.h`` (and, if it touches memory,
its hooks in ``_PROFILED``).
"""
import re
from dataclasses import dataclass

#: The architecture a module is built for when nothing says otherwise: the emulated device's (_device).
DEFAULT_SM = 80


class Target(int):
    """The architecture a module is built for: its sm number (an int: sm_90 is 90), and ``specific``, whether it
    was named with the "a" suffix (sm_90a), which is what Hopper's warpgroup and TMA instructions need (ptxas
    refuses them for plain sm_90)."""

    def __new__(cls, sm, specific=False):
        target = super().__new__(cls, sm)
        target.specific = bool(specific)
        return target

    def __repr__(self):
        return f"sm_{int(self)}{'a' if self.specific else ''}"

    __str__ = __repr__


class Refused(ValueError):
    """An ``asm()`` statement the emulator cannot run; ``line`` is its line in the file."""

    def __init__(self, message, line):
        super().__init__(message)
        self.line = line


# ---- the table --------------------------------------------------------------------------------------
# An operand of an instruction: ``regs`` a register or a {vector} of ``count`` registers of ``bits`` bits (a
# destination or a source), ``shared`` / ``global`` an address in brackets ([%0], [%0+16]), ``generic`` one in
# no state space (a 64-bit pointer), ``imm`` an integer (a literal or an "n" operand).
@dataclass(frozen=True)
class Operand:
    kind: str              # "regs", "shared", "global", "generic", "imm"
    count: int = 1
    bits: int = 32
    dest: bool = False
    optional: bool = False
    sink: bool = False     # a destination that may be "_" (the result discarded)


def _regs(count, bits=32, dest=False):
    return Operand("regs", count, bits, dest)


@dataclass(frozen=True)
class Instruction:
    form: str              # how the refusal lists it
    pattern: str           # the opcode with its modifiers (a regular expression, matched whole)
    sm: int                # the first architecture that has it (ptxas refuses it below)
    op: str                # gpuedu_ptx.h's op
    warp: bool             # the warp's lanes execute it together (.sync.aligned)
    operands: object       # match -> the operands, destinations first
    mods: object           # match -> the modifiers' bits gpuedu_ptx.h reads
    specific: bool = False  # only for the architecture-specific target (sm_90a), as ptxas has it
    needs: object = None   # (match, operand count) -> the first architecture that has this form, where some of
                           # the row's forms need a later one than ``sm``


_MMA_INPUT = {"f16": 0, "bf16": 1, "tf32": 2}


def _mma_operands(m):
    k16, kind = m["shape"] == "m16n8k16", m["a"]
    a_regs, b_regs = (4, 2) if kind == "tf32" or k16 else (2, 1)
    acc = {"f32": 4, "f16": 2}
    return [_regs(acc[m["d"]], dest=True), _regs(a_regs), _regs(b_regs), _regs(acc[m["c"]])]


def _mma_mods(m):
    return ((0 if m["shape"] == "m16n8k16" else 1) | _MMA_INPUT[m["a"]] << 2 | (m["c"] == "f16") << 4
            | (m["d"] == "f16") << 5)


def _ldmatrix_operands(m):
    return [_regs(int(m["x"]), dest=True), Operand("shared")]


def _cp_async_operands(m):
    return [Operand("shared"), Operand("global"), Operand("imm"), Operand("imm", optional=True)]


def _mov_operands(m):
    if m["pack"]:
        return [_regs(1, 2 * int(m["bits"]), dest=True), _regs(2, int(m["bits"]))]
    return [_regs(2, int(m["bits"]), dest=True), _regs(1, 2 * int(m["bits"]))]


# ---- mbarrier (gpuedu_mbarrier.h) --------------------------------------------------------------------------
# The state space: .shared or .shared::cta, the block's own shared memory, with a shared address (32 or 64 bits);
# none, a generic pointer (64 bits) into it; an arrival may also name .shared::cluster, an mbarrier of another block
# of the cluster (_ARRIVE_SPACE). The .sem and .scope a form may name (.release.cta, .acquire.cta,
# .relaxed.cluster, ...) order memory between threads and blocks of a cluster: the emulator's memory is one, written
# by one fiber at a time in program order, so each is exact here without more.
_SPACE = r"(?P<space>\.shared(?:::cta)?)?"
# An arrival may be on an mbarrier of another block of the cluster (.shared::cluster, a shared::cluster address from
# mapa), its state then discarded ("_"), as the PTX ISA has it.
_ARRIVE_SPACE = r"(?P<space>\.shared(?:::cta|::(?P<cluster>cluster))?)?"
_ARRIVE_SEM = r"(?:\.(?P<sem>release|relaxed)\.(?P<scope>cta|cluster))?"
_WAIT_SEM = r"(?:\.(?P<sem>acquire|relaxed)\.(?P<scope>cta|cluster))?"
# gpuedu_mbarrier.h's MB_ bits (keep both in step)
_MB_GENERIC, _MB_COUNT, _MB_EXPECT_TX, _MB_PARITY, _MB_TRY, _MB_LOOP, _MB_CLUSTER = 1, 2, 4, 8, 16, 32, 64


def _mbar_address(m):
    return Operand("shared" if m["space"] else "generic")


def _mbar_mods(m):
    return (0 if m["space"] else _MB_GENERIC) | (_MB_CLUSTER if m.groupdict().get("cluster") else 0)


def _sm90_scope(m):
    """.relaxed and .cluster came with Hopper (ptxas refuses them for sm_80; .release.cta and .acquire.cta it takes)."""
    return m["sem"] == "relaxed" or m["scope"] == "cluster"


def _arrive_operands(m):
    # state, [addr], then arrive's count (optional) or arrive.expect_tx's transaction count
    return [Operand("regs", 1, 64, dest=True, sink=True), _mbar_address(m), Operand("imm", optional=not m["tx"])]


def _arrive_needs(m, operands):
    return 90 if m["tx"] or operands == 3 or _sm90_scope(m) or m["cluster"] else 80


def _wait_operands(m):
    # the result first: the predicate, bound by the idiom around the wait (_scoped_wait) to a C++ value or to none
    arg = Operand("imm") if m["parity"] else _regs(1, 64)
    hint = [Operand("imm", optional=True)] if m["kind"] == "try" else []
    return [_regs(1, dest=True), _mbar_address(m), arg, *hint]


def _wait_mods(m):
    return _mbar_mods(m) | (_MB_PARITY if m["parity"] else 0) | (_MB_TRY if m["kind"] == "try" else 0)


_MMA_PATTERN = (r"mma\.sync\.aligned\.(?P<shape>m16n8k16|m16n8k8)\.row\.col"
                r"\.(?P<d>f32|f16)\.(?P<a>f16|bf16|tf32)\.(?P<b>f16|bf16|tf32)\.(?P<c>f32|f16)")

#: Every instruction the emulator runs. ``form`` is what a refusal lists; the PTX ISA gives the semantics.
INSTRUCTIONS = (
    Instruction("mma.sync.aligned.m16n8k16.row.col.{f32,f16}.{f16,bf16}.{f16,bf16}.{f32,f16} (.bf16: f32 only)",
                _MMA_PATTERN, 80, "MMA", True, _mma_operands, _mma_mods),
    Instruction("mma.sync.aligned.m16n8k8.row.col.{f32,f16}.f16.f16.{f32,f16}, .f32.tf32.tf32.f32",
                _MMA_PATTERN, 75, "MMA", True, _mma_operands, _mma_mods),
    Instruction("ldmatrix.sync.aligned.m8n8.{x1,x2,x4}[.trans].shared[::cta].b16",
                r"ldmatrix\.sync\.aligned\.m8n8\.x(?P<x>[124])(?P<trans>\.trans)?\.shared(?:::cta)?\.b16",
                75, "LDMATRIX", True, _ldmatrix_operands, lambda m: int(m["x"]) | bool(m["trans"]) << 3),
    Instruction("cp.async.{ca,cg}.shared[::cta].global [dst], [src], {4,8,16}[, src-size] (.cg: 16 only)",
                r"cp\.async\.(?P<cache>ca|cg)\.shared(?:::cta)?\.global(?:\.L2::(?:64|128|256)B)?",
                80, "CP_ASYNC", False, _cp_async_operands, lambda m: (m["cache"] == "cg") << 5),
    Instruction("cp.async.commit_group", r"cp\.async\.commit_group", 80, "CP_COMMIT", False, lambda m: [],
                lambda m: 0),
    Instruction("cp.async.wait_group N", r"cp\.async\.wait_group", 80, "CP_WAIT", False,
                lambda m: [Operand("imm")], lambda m: 0),
    Instruction("cp.async.wait_all", r"cp\.async\.wait_all", 80, "CP_WAIT_ALL", False, lambda m: [], lambda m: 0),
    Instruction("cvta.to.shared.u64 (generic to shared)", r"cvta\.to\.shared(?:::cta)?\.u64", 20, "CVTA_TO_SHARED",
                False, lambda m: [_regs(1, 64, dest=True), _regs(1, 64)], lambda m: 0),
    Instruction("cvta.shared.u64 (shared to generic)", r"cvta\.shared(?:::cta)?\.u64", 20, "CVTA_TO_GENERIC", False,
                lambda m: [_regs(1, 64, dest=True), _regs(1, 64)], lambda m: 0),
    Instruction("cvt.u32.u64 (a shared address to 32 bits)", r"cvt\.u32\.u64", 10, "CVT_U32_U64", False,
                lambda m: [_regs(1, 32, dest=True), _regs(1, 64)], lambda m: 0),
    Instruction("mov.b32 d, {a, b} and mov.b32 {a, b}, d (16-bit halves); mov.b64 likewise (32-bit words)",
                r"mov\.b(?P<whole>32|64)", 10, "MOV", False, None, None),
    Instruction("cvt.rn.{f16x2,bf16x2}.f32 d, a, b (a to the upper half)",
                r"cvt\.rn\.(?P<t>f16x2|bf16x2)\.f32", 80, "CVT_PACK", False,
                lambda m: [_regs(1, dest=True), _regs(1), _regs(1)], lambda m: 0),
    Instruction("cvt.rna.tf32.f32", r"cvt\.rna\.tf32\.f32", 80, "CVT_TF32", False,
                lambda m: [_regs(1, dest=True), _regs(1)], lambda m: 0),
    # mbarrier ("Parallel Synchronization and Communication Instructions: mbarrier"; the architectures as ptxas
    # has them: Ampere's init, inval, arrive and test_wait, Hopper's transaction counts, try_wait and arrive's count)
    Instruction("mbarrier.init[.shared[::cta]].b64 [addr], count  (no state space: a generic 64-bit pointer)",
                r"mbarrier\.init" + _SPACE + r"\.b64", 80, "MBAR_INIT", False,
                lambda m: [_mbar_address(m), Operand("imm")], _mbar_mods),
    Instruction("mbarrier.inval[.shared[::cta]].b64 [addr]", r"mbarrier\.inval" + _SPACE + r"\.b64", 80, "MBAR_INVAL",
                False, lambda m: [_mbar_address(m)], _mbar_mods),
    Instruction("mbarrier.arrive[.release.cta][.shared[::cta]].b64 state, [addr]  (state: a 64-bit \"l\" output, "
                "or _); sm_90: state, [addr], count; .release.cluster, .relaxed.{cta,cluster}; .shared::cluster "
                "(another block's mbarrier: _, [mapa address])",
                r"mbarrier\.arrive(?P<tx>)" + _ARRIVE_SEM + _ARRIVE_SPACE + r"\.b64", 80, "MBAR_ARRIVE", False,
                _arrive_operands, _mbar_mods, needs=_arrive_needs),
    Instruction("mbarrier.arrive.expect_tx[.{release,relaxed}.{cta,cluster}][.shared[::{cta,cluster}]].b64 state, [addr], "
                "tx_count", r"mbarrier\.arrive(?P<tx>\.expect_tx)" + _ARRIVE_SEM + _ARRIVE_SPACE + r"\.b64", 90,
                "MBAR_ARRIVE", False, _arrive_operands, lambda m: _mbar_mods(m) | _MB_EXPECT_TX),
    Instruction("mbarrier.expect_tx[.relaxed.{cta,cluster}][.shared[::cta]].b64 [addr], tx_count",
                r"mbarrier\.expect_tx(?:\.relaxed\.(?:cta|cluster))?" + _SPACE + r"\.b64", 90, "MBAR_EXPECT_TX", False,
                lambda m: [_mbar_address(m), Operand("imm")], _mbar_mods),
    Instruction("mbarrier.complete_tx[.relaxed.{cta,cluster}][.shared[::cta]].b64 [addr], tx_count",
                r"mbarrier\.complete_tx(?:\.relaxed\.(?:cta|cluster))?" + _SPACE + r"\.b64", 90, "MBAR_COMPLETE_TX",
                False, lambda m: [_mbar_address(m), Operand("imm")], _mbar_mods),
    Instruction("mbarrier.test_wait[.parity][.acquire.cta][.shared[::cta]].b64 P, [addr], {phaseParity,state}  "
                "(in a { .reg .pred P; ... } idiom below); sm_90: .acquire.cluster, .relaxed.{cta,cluster}",
                r"mbarrier\.(?P<kind>test)_wait(?P<parity>\.parity)?" + _WAIT_SEM + _SPACE + r"\.b64",
                80, "MBAR_WAIT", False, _wait_operands, _wait_mods, needs=lambda m, n: 90 if _sm90_scope(m) else 80),
    Instruction("mbarrier.try_wait[.parity][.{acquire,relaxed}.{cta,cluster}][.shared[::cta]].b64 P, [addr], "
                "{phaseParity,state}[, suspendTimeHint]  (in a { .reg .pred P; ... } idiom below)",
                r"mbarrier\.(?P<kind>try)_wait(?P<parity>\.parity)?" + _WAIT_SEM + _SPACE + r"\.b64",
                90, "MBAR_WAIT", False, _wait_operands, _wait_mods),
    Instruction("fence.proxy.async[.shared::cta,.shared::cluster,.global]  (a no-op: the emulator's memory is one "
                "proxy)", r"fence\.proxy\.async(?:\.shared::cta|\.shared::cluster|\.global)?", 90, "NOP", False,
                lambda m: [], lambda m: 0),
    Instruction("fence.mbarrier_init.release.cluster  (a no-op: likewise)", r"fence\.mbarrier_init\.release\.cluster",
                90, "NOP", False, lambda m: [], lambda m: 0),
    Instruction("setmaxnreg.{inc,dec}.sync.aligned.u32 N  (N from 24 to 256, a multiple of 8; a block of whole "
                "warpgroups)", r"setmaxnreg\.(?P<dir>inc|dec)\.sync\.aligned\.u32", 90, "SETMAXNREG", True,
                lambda m: [Operand("imm")], lambda m: (m["dir"] == "inc") << 9, specific=True),
)

#: The two forms of an mbarrier wait public code writes, whose predicate stays inside the statement (inline asm
#: binds no predicate to a C++ value): its value through selp, or a loop that ends once the phase completed.
WAIT_IDIOMS = ("{ .reg .pred P; mbarrier.try_wait.parity.shared::cta.b64 P, [%1], %2; selp.b32 %0, 1, 0, P; }  "
               "(%0: 1 once the phase of parity %2 completed, else 0)",
               "{ .reg .pred P; WAIT: mbarrier.try_wait.parity.shared::cta.b64 P, [%0], %1; @P bra DONE; bra WAIT; "
               "DONE: }  (returns once it completed; or @!P bra WAIT; as the loop's end)")


# Hopper's warpgroup MMA (sm_90a only, as ptxas has it): a row's operands are read by _wgmma_code, not the generic
# path. mma_async is a meeting of the warpgroup's 128 threads (gpuedu_wgmma.h's warpgroup_meet);
# fence, commit_group and wait_group are checked here and have nothing left to do at run time, since mma_async's
# product is in its registers when it returns (gpuedu_wgmma.h says what that hides). (fence.proxy.async, which orders
# a thread's shared-memory writes before an async-proxy read such as wgmma's, is the mbarrier block's no-op row.)
_WGMMA_MMA_PATTERN = (r"wgmma\.mma_async\.sync\.aligned\.m64n(?P<n>\d+)k(?P<k>\d+)\.(?P<d>[a-z0-9]+)"
                      r"\.(?P<a>[a-z0-9]+)\.(?P<b>[a-z0-9]+)")
_WGMMA_OPS = ("WGMMA_MMA", "WGMMA_FENCE", "WGMMA_COMMIT", "WGMMA_WAIT")
INSTRUCTIONS += (
    Instruction("wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}.{f16,bf16} d, {a-desc | {a0,a1,a2,a3}}, "
                "b-desc, scale-d, imm-scale-a, imm-scale-b[, imm-trans-a], imm-trans-b (N = 8, 16, ..., 256)",
                _WGMMA_MMA_PATTERN, 90, "WGMMA_MMA", True, None, None, specific=True),
    Instruction("wgmma.fence.sync.aligned", r"wgmma\.fence\.sync\.aligned", 90, "WGMMA_FENCE", True, None, None,
                specific=True),
    Instruction("wgmma.commit_group.sync.aligned", r"wgmma\.commit_group\.sync\.aligned", 90, "WGMMA_COMMIT", True,
                None, None, specific=True),
    Instruction("wgmma.wait_group.sync.aligned N", r"wgmma\.wait_group\.sync\.aligned", 90, "WGMMA_WAIT", True,
                None, None, specific=True),
)

# The Tensor Memory Accelerator (gpuedu_tma.h; sm_90): a tensor copy's operands are read by _tensor_copy_code. A load
# lands in shared memory when a thread waits on its mbarrier; a store is done when issued, so the bulk group's commit
# and wait have nothing left to do, and prefetch.tensormap, a hint, neither.
_TMA_LOAD = (r"cp\.async\.bulk\.tensor\.(?P<rank>[1-5])d\.shared::(?:cluster|cta)\.global(?:\.tile)?"
             r"\.mbarrier::complete_tx::bytes(?P<multicast>\.multicast::cluster)?")
_TMA_STORE = r"cp\.async\.bulk\.tensor\.(?P<rank>[1-5])d\.global\.shared::cta(?:\.tile)?\.bulk_group"
_TMA_OPS = ("TMA_LOAD", "TMA_STORE")
INSTRUCTIONS += (
    Instruction("cp.async.bulk.tensor.{1-5}d.shared::{cluster,cta}.global[.tile].mbarrier::complete_tx::bytes"
                "[.multicast::cluster] [dst], [map, {c0, ...}], [mbar][, ctaMask]  (map: the CUtensorMap parameter's "
                "address, \"l\"; ctaMask: 16 bits, \"h\"; no .L2::cache_hint)", _TMA_LOAD, 90, "TMA_LOAD", False, None,
                None),
    Instruction("cp.async.bulk.tensor.{1-5}d.global.shared::cta[.tile].bulk_group [map, {c0, ...}], [src]",
                _TMA_STORE, 90, "TMA_STORE", False, None, None),
    Instruction("cp.async.bulk.commit_group", r"cp\.async\.bulk\.commit_group", 90, "NOP", False, lambda m: [],
                lambda m: 0),
    Instruction("cp.async.bulk.wait_group[.read] N", r"cp\.async\.bulk\.wait_group(?:\.read)?", 90, "NOP", False,
                lambda m: [Operand("imm")], lambda m: 0),
    Instruction("prefetch[.{const,param}].tensormap [map]  (a hint: nothing to do)",
                r"prefetch(?:\.(?:const|param))?\.tensormap", 90, "NOP", False, lambda m: [Operand("generic")],
                lambda m: 0),
)


# Thread-block clusters (gpuedu_cluster.h; sm_90): the cluster's special registers (read with mov), mapa's
# addresses of another block's shared memory and the loads and stores through them (distributed shared memory), and
# barrier.cluster, which every non-exited thread of the cluster arrives at before any wait returns. fence.acq_rel
# and fence.sc at cluster scope have nothing to order in the emulator's one memory, written by one thread at a time.
#: The special registers the emulator reads (gpuedu_ptx.h's SR_ values; .x, .y, .z add 0, 1, 2).
#: (%is_explicit_cluster is a predicate, which inline asm binds to no C++ value; a kernel declared with
#: __cluster_dims__ always runs in an explicit cluster.)
CLUSTER_REGISTERS = {"cluster_ctarank": 0, "cluster_nctarank": 1, "clusterid": 4,
                     "nclusterid": 8, "cluster_ctaid": 12, "cluster_nctaid": 16}
# A special register as a template names it: %name[.x|.y|.z] (%% in a template with operands).
_SPECIAL_REGISTER = re.compile(r"%%?([a-z_]+)(?:\.([xyz]))?")
_CLUSTER_TYPES = {"b32": 32, "u32": 32, "s32": 32, "f32": 32, "b64": 64, "u64": 64, "s64": 64, "f64": 64}
INSTRUCTIONS += (
    Instruction("mov.{u32,b32} d, %cluster_ctarank  (and %cluster_nctarank, "
                "%{clusterid,nclusterid,cluster_ctaid,cluster_nctaid}.{x,y,z})", r"mov\.(?:u32|s32)", 90, "SREG",
                False, None, None),
    Instruction("mapa.shared::cluster.{u32,u64} d, a, rank  (a shared address of this block to block rank's); "
                "mapa.u64 d, a, rank  (generic pointers)", r"mapa(?P<space>\.shared::cluster)?\.(?P<t>u32|u64)", 90,
                "MAPA", False, lambda m: [_regs(1, int(m["t"][1:]), dest=True), _regs(1, int(m["t"][1:])),
                                          Operand("imm")],
                lambda m: 0 if m["space"] else 1),
    Instruction("ld.shared::cluster.{b,u,s,f}{32,64} d, [a]  (a: a shared::cluster address, from mapa)",
                r"ld\.shared::cluster\.(?P<t>[bsuf](?:32|64))", 90, "LD_CLUSTER", False,
                lambda m: [_regs(1, _CLUSTER_TYPES[m["t"]], dest=True), Operand("shared")],
                lambda m: _CLUSTER_TYPES[m["t"]] // 8),
    Instruction("st.shared::cluster.{b,u,s,f}{32,64} [a], v", r"st\.shared::cluster\.(?P<t>[bsuf](?:32|64))", 90,
                "ST_CLUSTER", False, lambda m: [Operand("shared"), _regs(1, _CLUSTER_TYPES[m["t"]])],
                lambda m: _CLUSTER_TYPES[m["t"]] // 8),
    Instruction("barrier.cluster.arrive[.release,.relaxed][.aligned]",
                r"barrier\.cluster\.arrive(?:\.release|\.relaxed)?(?:\.aligned)?", 90, "CLUSTER_BARRIER", False,
                None, lambda m: 0),
    Instruction("barrier.cluster.wait[.acquire][.aligned]", r"barrier\.cluster\.wait(?:\.acquire)?(?:\.aligned)?", 90,
                "CLUSTER_BARRIER", False, None, lambda m: 1),
    Instruction("fence.{acq_rel,sc}.cluster  (a no-op: the emulator's memory is one)", r"fence\.(?:acq_rel|sc)\.cluster",
                90, "NOP", False, lambda m: [], lambda m: 0),
)


#: What a profiled build adds before an op's runtime call, at the statement's site: the counters' hooks, each
#: one of the lane's accesses (gpuedu_profile.h), from where gpuedu_ptx.h says the instruction reads and writes.
_PROFILED = {
    "LDMATRIX": "__gpuedu_prof_ldsm(::__gpuedu::ptx::ldmatrix_row(__gpuedu_in[0], {mods}, {line}));",
    "CP_ASYNC": ("{{ const ::__gpuedu::ptx::CopyParts __gpuedu_cp = ::__gpuedu::ptx::cp_async_parts(__gpuedu_in, "
                 "{mods}, {line}); __gpuedu_prof_ldgsts_read(__gpuedu_cp.src, __gpuedu_cp.src_bytes); "
                 "__gpuedu_prof_ldgsts_write(__gpuedu_cp.dst, __gpuedu_cp.bytes); }}"),
}


def supported():
    """What a refusal lists: each supported form, one a line, then the idioms an mbarrier wait is written in."""
    return "\n".join([f"  {i.form}  ({'sm_%da' % i.sm if i.specific else 'sm_%d and later' % i.sm})"
                      for i in INSTRUCTIONS] + ["  an mbarrier wait, in one of these (.u32 or .s32 for selp too):"]
                     + [f"    {idiom}" for idiom in WAIT_IDIOMS])


def _valid_mma(m, line, sm):
    """The type combinations the PTX ISA allows for mma.sync (others are refused as ptxas does)."""
    a, b, c, d, shape = m["a"], m["b"], m["c"], m["d"], m["shape"]
    if a != b:
        raise Refused(f"mma.sync's A and B must have the same type, got .{a} and .{b}", line)
    if a in ("bf16", "tf32") and (c, d) != ("f32", "f32"):
        raise Refused(f"mma.sync with .{a} inputs accumulates in .f32 only (.f32.{a}.{a}.f32), got .{d} and .{c}",
                      line)
    if a == "tf32" and shape != "m16n8k8":
        raise Refused("mma.sync with .tf32 inputs is m16n8k8 (m16n8k16 is not in the emulator's subset)", line)
    need = 80 if shape == "m16n8k16" or a != "f16" else 75
    if sm < need:
        raise Refused(f"mma.sync.aligned.{shape} with .{a} inputs needs sm_{need} or later; this module is built "
                      f"for {_target(sm)} (ptxas refuses it there)", line)


# ---- reading an asm statement -----------------------------------------------------------------------
_ASM = re.compile(r"\b(?:asm|__asm__|__asm)\b(?P<quals>(?:\s*\b(?:volatile|__volatile__|inline|goto)\b)*)\s*\(")
_STRING_LITERAL = re.compile(r'"((?:\\.|[^"\\\n])*)"')
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "'": "'", "0": ""}
_CONSTRAINT_BYTES = {"h": 2, "r": 4, "f": 4, "l": 8, "d": 8, "n": 8, "i": 8}
_BLANK = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def _blank(source):
    return _BLANK.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), source)


def _matching(blank, start):
    depth = 0
    for k in range(start, len(blank)):
        if blank[k] == "(":
            depth += 1
        elif blank[k] == ")":
            depth -= 1
            if depth == 0:
                return k
    return None


def _split(text, blank, separator):
    """``text`` cut at each ``separator`` outside brackets (found in ``blank``, its literals blanked)."""
    parts, depth, start = [], 0, 0
    for k, ch in enumerate(blank):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == separator and depth == 0:
            parts.append((text[start:k], blank[start:k]))
            start = k + 1
    parts.append((text[start:], blank[start:]))
    return parts


def _unescape(body):
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), body)


@dataclass
class _AsmOperand:
    number: int
    name: str
    constraint: str        # the letter
    mode: str              # "=", "+" or "" (an input)
    expr: str
    tied: int = None       # an input tied to output N ("0")


def _operands(text, blank, first, line, outputs, inputs):
    found = []
    if not text.strip():
        return found
    for k, (part, part_blank) in enumerate(_split(text, blank, ",")):
        m = re.match(r'\s*(?:\[\s*(?P<name>\w+)\s*\]\s*)?"(?P<c>[^"]*)"\s*\((?P<expr>.*)\)\s*$', part, re.S)
        if not m:
            raise Refused(f"cannot read the asm operand {part.strip()!r}: each is \"constraint\"(expression)", line)
        constraint = m["c"].replace("&", "")
        mode = constraint[0] if constraint[:1] in "=+" else ""
        letters = constraint.lstrip("=+")
        tied = None
        if letters.isdigit() and inputs:
            tied = int(letters)
            if tied >= len(outputs):
                raise Refused(f"the asm input \"{letters}\" ties to output {tied}, which does not exist", line)
            letters = outputs[tied].constraint
        if len(letters) != 1 or letters not in _CONSTRAINT_BYTES:
            raise Refused(f"the asm constraint \"{m['c']}\" of ({m['expr'].strip()}) is not one the emulator takes: "
                          f"\"r\" (32-bit), \"h\" (16-bit), \"f\" (float), \"l\" (64-bit), \"d\" (double), "
                          f"\"n\" (an immediate), with = or + for outputs", line)
        if inputs and mode:
            raise Refused(f"the asm input \"{m['c']}\" has {mode}: only outputs are written", line)
        found.append(_AsmOperand(first + k, m["name"] or "", letters, mode, m["expr"].strip(), tied))
    return found


def _template(text, blank, line):
    pieces = []
    for m in re.finditer(r'"(?:\\.|[^"\\\n])*"|\S+', text):
        token = m.group(0)
        if not token.startswith('"'):
            raise Refused(f"the asm template must be string literals only; found {token!r} (a macro?). Write the "
                          f"instruction out, with its operands as %0, %1, ...", line)
        pieces.append(_unescape(token[1:-1]))
    return "".join(pieces)


# ---- an instruction's operands ----------------------------------------------------------------------------
def _ptx_operands(text):
    """An instruction's operand text split at top-level commas."""
    parts, depth, start = [], 0, 0
    for k, ch in enumerate(text):
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:k].strip())
            start = k + 1
    last = text[start:].strip()
    if last or parts:
        parts.append(last)
    return parts


class _Statement:
    """One asm statement being rewritten: its operands, and the C++ that reads and writes them."""

    def __init__(self, operands, line):
        self.operands = operands
        self.by_name = {o.name: o for o in operands if o.name}
        self.line = line

    def ref(self, token, instruction):
        m = re.fullmatch(r"%(?:(\d+)|\[(\w+)\])", token.strip())
        if not m:
            raise Refused(f"{instruction}: {token.strip()!r} is not an operand the emulator takes here: write %0, "
                          f"%1, ... (or %[name]) bound to C++ values (registers of PTX's own, such as %laneid or "
                          f"names declared with .reg, are not supported)", self.line)
        if m[1] is not None:
            n = int(m[1])
            if n >= len(self.operands):
                raise Refused(f"{instruction}: %{n} names no operand (the statement has {len(self.operands)})",
                              self.line)
            return self.operands[n]
        if m[2] not in self.by_name:
            raise Refused(f"{instruction}: %[{m[2]}] names no operand", self.line)
        return self.by_name[m[2]]

    def source(self, op, instruction, bits):
        """C++ for the value of source register ``op`` (an operand of ``bits`` bits)."""
        if op.mode == "=":
            ties = [o for o in self.operands if o.tied == op.number]
            if not ties:
                raise Refused(f"{instruction} reads %{op.number}, an output only (\"={op.constraint}\"): make it "
                              f"\"+{op.constraint}\" to pass its value in", self.line)
            op = ties[0]
        self.check_size(op, instruction, bits)
        return f"::__gpuedu::ptx::in<{_CONSTRAINT_BYTES[op.constraint]}>({op.expr})"

    def check_size(self, op, instruction, bits):
        have = _CONSTRAINT_BYTES[op.constraint] * 8
        if op.constraint in "ni":
            raise Refused(f"{instruction}: %{op.number} is an immediate (\"{op.constraint}\") where a {bits}-bit "
                          f"register is needed", self.line)
        if have != bits:
            letter = {16: '"h"', 32: '"r" (or "f" for a float)', 64: '"l"'}.get(bits, "?")
            raise Refused(f"{instruction}: operand %{op.number} ({op.expr}) is bound with \"{op.constraint}\", "
                          f"{have} bits, where the instruction takes a {bits}-bit register: use {letter}",
                          self.line)


def _address(st, text, instruction, space):
    m = re.fullmatch(r"\[\s*(%\d+|%\[\w+\])\s*(?:\+\s*(-?\d+|0x[0-9a-fA-F]+)\s*)?\]", text)
    if not m:
        raise Refused(f"{instruction}: the address {text!r} must be [%N] or [%N+offset]", st.line)
    op = st.ref(m[1], instruction)
    if op.constraint not in ("r", "l"):
        raise Refused(f"{instruction}: the address %{op.number} is bound with \"{op.constraint}\"; a {space} address "
                      f"is \"r\" (32-bit) or \"l\" (64-bit)", st.line)
    if space == "global" and op.constraint != "l":
        raise Refused(f"{instruction}: the global address %{op.number} is bound with \"r\" (32 bits): pass the "
                      f"pointer with \"l\"", st.line)
    if space == "generic" and op.constraint != "l":
        raise Refused(f"{instruction}: the address %{op.number} is bound with \"r\" (32 bits), and with no state "
                      f"space the instruction takes a generic address, a 64-bit pointer (\"l\"); for a 32-bit shared "
                      f"address (__cvta_generic_to_shared) name the space: {_with_space(instruction)}", st.line)
    if op.mode == "=":
        raise Refused(f"{instruction}: the address %{op.number} is an output", st.line)
    offset = int(m[2], 0) if m[2] else 0
    value = f"::__gpuedu::ptx::in<{_CONSTRAINT_BYTES[op.constraint]}>({op.expr})"
    return f"({value} + {offset}ull)" if offset else value


def _with_space(opcode):
    """``opcode`` with .shared::cta before its .b64 (what a 32-bit shared address needs)."""
    return re.sub(r"\.b64$", ".shared::cta.b64", opcode)


def _immediate(st, text, instruction):
    text = text.strip()
    if re.fullmatch(r"-?(?:0[xX][0-9a-fA-F]+|\d+)", text):
        return f"{int(text, 0)}ull", int(text, 0)
    op = st.ref(text, instruction)
    if op.constraint not in ("n", "i", "r"):
        raise Refused(f"{instruction}: %{op.number} must be an integer (\"n\" or \"r\")", st.line)
    return f"::__gpuedu::ptx::in<8>({op.expr})", None


def _instruction_code(st, text, sm, profile=False, idiom=None, scale_d_predicate=None):
    """The C++ for one instruction (its text without the ';'); ``profile``: with the counters' hooks; ``idiom``: for
    an mbarrier wait, the form around it (_scoped_wait): "value" (its first operand the selp's destination) or
    "loop" (no destination)."""
    text = text.strip()
    if text.startswith("@"):
        raise Refused(f"{text.split()[0]} (a predicated instruction) is not supported by the emulator: put the "
                      f"asm statement under an if in C++", st.line)
    if text.startswith((".reg", "{", "}")):
        raise Refused(_SCOPES_REFUSED, st.line)
    opcode, _, rest = text.partition(" ")
    opcode, rest = opcode.strip(), rest.strip()
    row = match = None
    for instruction in INSTRUCTIONS:
        match = re.fullmatch(instruction.pattern, opcode)
        if match:
            row = instruction
            break
    if row is None:
        raise Refused(f"the emulator does not run the PTX instruction {opcode!r}. It runs these (the PTX ISA's "
                      f"semantics), for the module's architecture:\n{supported()}\nWrite the rest in CUDA C.",
                      st.line)
    parts = _ptx_operands(rest)
    if row.op == "SREG" and not (len(parts) == 2 and _cluster_register(parts[1]) is not None):
        raise Refused(f"the emulator does not run the PTX instruction {opcode!r} with {rest!r}: it reads the cluster's "
                      f"special registers with mov (copy other values in C++: threadIdx, blockIdx, a lane from "
                      f"threadIdx.x % 32). It runs these (the PTX ISA's semantics), for the module's architecture:\n"
                      f"{supported()}\nWrite the rest in CUDA C.", st.line)
    if idiom is not None and row.op != "MBAR_WAIT":
        raise Refused(_SCOPES_REFUSED, st.line)
    if row.op == "MBAR_WAIT" and idiom is None:
        raise Refused(f"{opcode} sets a predicate, which inline asm binds to no C++ value: the emulator runs it in "
                      f"the forms public code writes it in, with the predicate inside the statement:\n    "
                      + "\n    ".join(WAIT_IDIOMS), st.line)
    if idiom == "loop":
        parts = [""] + parts                    # (the predicate, which the loop keeps to itself)
    first = row.needs(match, len(parts)) if row.needs else row.sm
    if row.op == "MMA":
        _valid_mma(match, st.line, sm)
    elif row.specific and not (getattr(sm, "specific", False) and int(sm) == row.sm):
        why = (f"where ptxas refuses it (\"Instruction '{_ptxas_name(opcode)}' not supported on .target "
               f"'{_target(sm)}'\")" if row.op in _WGMMA_OPS else "(ptxas refuses it there)")
        sep = ", " if row.op in _WGMMA_OPS else " "
        raise Refused(f"{opcode} needs the architecture-specific target sm_{row.sm}a; this module is built for "
                      f"{_target(sm)}{sep}{why}: build with arch='sm_{row.sm}a'", st.line)
    elif sm < first:
        form = " in this form" if first > row.sm else ""
        raise Refused(f"{opcode}{form} needs sm_{first} or later; this module is built for {_target(sm)} (ptxas "
                      f"refuses it there): build for a later architecture (arch='sm_{first}"
                      f"{'a' if row.specific else ''}')", st.line)
    if row.op == "MOV":
        if sm < 90 and len(parts) == 2 and _SPECIAL_REGISTER.fullmatch(parts[1].strip()):
            raise Refused(f"{opcode} {parts[1].strip()}: the cluster's special registers need sm_90 or later; this "
                          f"module is built for {_target(sm)} (ptxas refuses them there): build for arch='sm_90'",
                          st.line)
        return _mov_code(st, opcode, match, parts)
    if row.op in _WGMMA_OPS:
        return _wgmma_code(st, opcode, match, parts, row.op, scale_d_predicate)
    if row.op in _TMA_OPS:
        return _tensor_copy_code(st, opcode, match, parts, row.op)
    if row.op == "SREG":
        return _special_register_code(st, opcode, parts)
    if row.op == "CLUSTER_BARRIER":
        if parts:
            raise Refused(f"{opcode} takes no operands, got {rest}", st.line)
        return "{ " + f"__gpuedu_ptx_cluster({row.mods(match)}, {st.line});" + " }"
    if _cluster_arrival(row, match) and parts and parts[0] != "_":
        raise Refused(f"{opcode}: an arrival on another block's mbarrier (.shared::cluster) returns no state: write "
                      f"_ as its first operand ({opcode} _, [addr])", st.line)
    specs = row.operands(match)
    need = [s for s in specs if not s.optional]
    if not len(need) <= len(parts) <= len(specs):
        counts = str(len(need)) if len(need) == len(specs) else f"{len(need)} or {len(specs)}"
        raise Refused(f"{opcode} takes {counts} operands, got {len(parts)}: {rest or '(none)'}", st.line)
    op, mods = row.op, row.mods(match)
    sources, writes, n_out = [], [], 0
    for k, (spec, part) in enumerate(zip(specs, parts)):
        if (spec.dest and spec.sink and part == "_") or (idiom == "loop" and k == 0):
            continue                            # a result discarded
        if spec.kind == "regs":
            regs = _vector(st, part, spec.count, opcode)
            for token in regs:
                o = st.ref(token, opcode)
                if spec.dest:
                    if not o.mode:
                        raise Refused(f"{opcode} writes %{o.number}, an input: bind it as an output "
                                      f"(\"={o.constraint}\" or \"+{o.constraint}\")", st.line)
                    st.check_size(o, opcode, spec.bits)
                    writes.append(f"::__gpuedu::ptx::out<{_CONSTRAINT_BYTES[o.constraint]}>({o.expr}, "
                                  f"__gpuedu_out[{n_out}]);")
                    n_out += 1
                else:
                    sources.append(st.source(o, opcode, spec.bits))
        elif spec.kind in ("shared", "global", "generic"):
            sources.append(_address(st, part, opcode, spec.kind))
        else:
            value, literal = _immediate(st, part, opcode)
            sources.append(value)
    if op == "CP_ASYNC":
        size = _immediate(st, parts[2], opcode)[1]
        if size is None:
            size = _constant(st, parts[2])
        if size not in (4, 8, 16):
            raise Refused(f"{opcode} copies 4, 8 or 16 bytes, got {size}", st.line)
        if match["cache"] == "cg" and size != 16:
            raise Refused(f"{opcode}: cp.async.cg copies 16 bytes only (use .ca for {size})", st.line)
        mods |= size | (len(parts) == 4) << 6
    if op == "CVT_PACK":
        op = "CVT_F16X2" if match["t"] == "f16x2" else "CVT_BF16X2"
    if op == "MBAR_ARRIVE" and not match["tx"] and len(parts) == 3:
        mods |= _MB_COUNT
    if op == "SETMAXNREG":
        count = _register_count(st, parts[0], opcode)
        mods |= _SETMAXNREG_RUNTIME if count is None else count
    call = "__gpuedu_ptx_sync" if row.warp else "__gpuedu_ptx_run"
    code = []
    if sources:
        code.append(f"const unsigned long long __gpuedu_in[{len(sources)}] = {{{', '.join(sources)}}};")
    if n_out:
        code.append(f"unsigned long long __gpuedu_out[{n_out}];")
    if profile and op in _PROFILED:
        code.append(_PROFILED[op].format(mods=mods, line=st.line))
    if op == "MBAR_WAIT":                       # (a name of its own: the scan runs a kernel that waits as fibers)
        code.append(f"__gpuedu_ptx_wait({mods | (_MB_LOOP if idiom == 'loop' else 0)}, "
                    f"{'__gpuedu_out' if n_out else 'nullptr'}, __gpuedu_in, {st.line});")
    else:
        code.append(f"{call}(::__gpuedu::ptx::{op}, {mods}, {'__gpuedu_out' if n_out else 'nullptr'}, "
                    f"{'__gpuedu_in' if sources else 'nullptr'}, {st.line});")
    code.extend(writes)
    return "{ " + " ".join(code) + " }"


#: setmaxnreg's modifier when its count is a constant the rewrite cannot read: the count is its operand, checked when
#: it runs (gpuedu_ptx.h's setmaxnreg_warp).
_SETMAXNREG_RUNTIME = 1 << 10


def _register_count(st, text, opcode):
    """setmaxnreg's register count, an immediate ptxas checks: from 24 to 256, a multiple of 8 (None: an "n" operand
    whose expression the rewrite cannot read, checked when it runs)."""
    count = _immediate(st, text, opcode)[1]
    if count is None:
        op = st.ref(text.strip(), opcode)
        try:
            count = int(op.expr.rstrip("uUlL"), 0) if op.constraint in "ni" else None
        except ValueError:
            count = None
        if count is None and op.constraint in "ni":
            return None   # a constant the rewrite cannot read (a template parameter): checked when it runs
        if count is None:
            raise Refused(f"{opcode} takes its register count as an immediate (a literal, or an \"n\" operand): "
                          f"%{op.number} ({op.expr}) is bound with \"{op.constraint}\"", st.line)
    if not 24 <= count <= 256 or count % 8:
        raise Refused(f"{opcode}: the register count {count} must be from 24 to 256 and a multiple of 8", st.line)
    return count


def _constant(st, text):
    """The value of an "n" operand, when its expression is a plain integer (else 16: checked at run time)."""
    op = st.ref(text.strip(), "cp.async")
    try:
        return int(op.expr.rstrip("uUlL"), 0)
    except ValueError:
        raise Refused(f"cp.async's size %{op.number} must be a literal 4, 8 or 16 (\"n\"({op.expr}) is not one the "
                      f"emulator can read before compiling): write the number", st.line) from None


def _vector(st, text, count, opcode):
    text = text.strip()
    if text.startswith("{"):
        if not text.endswith("}"):
            raise Refused(f"{opcode}: unbalanced braces in {text!r}", st.line)
        tokens = [t.strip() for t in text[1:-1].split(",")]
    else:
        tokens = [text]
    if len(tokens) != count:
        raise Refused(f"{opcode} takes {count} register{'s' if count > 1 else ''} there, got {len(tokens)}: {text}",
                      st.line)
    return tokens


def _mov_code(st, opcode, match, parts):
    whole = int(match["whole"])
    if len(parts) != 2:
        raise Refused(f"{opcode} takes 2 operands, got {len(parts)}", st.line)
    half = whole // 2
    d, a = parts
    if d.startswith("{"):                       # mov.b32 {lo, hi}, a: unpack
        outs, src = _vector(st, d, 2, opcode), _vector(st, a, 1, opcode)
        o = st.ref(src[0], opcode)
        code = [f"const unsigned long long __gpuedu_in[1] = {{{st.source(o, opcode, whole)}}};",
                "unsigned long long __gpuedu_out[2];",
                f"__gpuedu_ptx_run(::__gpuedu::ptx::MOV_UNPACK, {half}, __gpuedu_out, __gpuedu_in, {st.line});"]
        for k, token in enumerate(outs):
            out = st.ref(token, opcode)
            _need_output(st, out, opcode)
            st.check_size(out, opcode, half)
            code.append(f"::__gpuedu::ptx::out<{_CONSTRAINT_BYTES[out.constraint]}>({out.expr}, __gpuedu_out[{k}]);")
        return "{ " + " ".join(code) + " }"
    if whole == 32 and _SPECIAL_REGISTER.fullmatch(a.strip()):
        return _special_register_code(st, opcode, parts)
    if not a.startswith("{"):
        raise Refused(f"{opcode}: the emulator runs mov only to pack or unpack ({opcode} d, {{a, b}} or "
                      f"{opcode} {{a, b}}, d); copy a value in C++", st.line)
    out, ins = st.ref(_vector(st, d, 1, opcode)[0], opcode), _vector(st, a, 2, opcode)
    _need_output(st, out, opcode)
    st.check_size(out, opcode, whole)
    values = [st.source(st.ref(t, opcode), opcode, half) for t in ins]
    return ("{ " + f"const unsigned long long __gpuedu_in[2] = {{{', '.join(values)}}}; "
            "unsigned long long __gpuedu_out[1]; "
            f"__gpuedu_ptx_run(::__gpuedu::ptx::MOV_PACK, {half}, __gpuedu_out, __gpuedu_in, {st.line}); "
            f"::__gpuedu::ptx::out<{_CONSTRAINT_BYTES[out.constraint]}>({out.expr}, __gpuedu_out[0]);" + " }")


def _cluster_arrival(row, match):
    """Whether the row is an mbarrier arrival on a block of the cluster, whose state operand must be "_"."""
    return row.op == "MBAR_ARRIVE" and bool(match.groupdict().get("cluster"))


def _cluster_register(text):
    """The number gpuedu_ptx.h's CLUSTER_SREG reads for ``text``, one of the cluster's special registers the emulator
    reads (with its .x/.y/.z where it has them); None for anything else."""
    m = _SPECIAL_REGISTER.fullmatch(text.strip())
    if not m or m[1] not in CLUSTER_REGISTERS or bool(m[2]) != (CLUSTER_REGISTERS[m[1]] >= 4):
        return None
    return CLUSTER_REGISTERS[m[1]] + ("xyz".index(m[2]) if m[2] else 0)


def _special_register_code(st, opcode, parts):
    """mov d, %cluster_ctarank (a cluster's special register; gpuedu_ptx.h's CLUSTER_SREG)."""
    if len(parts) != 2:
        raise Refused(f"{opcode} takes 2 operands, got {len(parts)}", st.line)
    which = _cluster_register(parts[1])
    if which is None:
        names = ", ".join(f"%{n}" + (".{x,y,z}" if v >= 4 else "") for n, v in CLUSTER_REGISTERS.items())
        raise Refused(f"{opcode}: the emulator reads these special registers with mov: {names} (copy other values in "
                      f"C++: threadIdx, blockIdx, a lane from threadIdx.x % 32), got {parts[1].strip()!r}", st.line)
    out = st.ref(_vector(st, parts[0], 1, opcode)[0], opcode)
    _need_output(st, out, opcode)
    st.check_size(out, opcode, 32)
    return ("{ unsigned long long __gpuedu_out[1]; "
            f"__gpuedu_ptx_run(::__gpuedu::ptx::CLUSTER_SREG, {which}, __gpuedu_out, nullptr, {st.line}); "
            f"::__gpuedu::ptx::out<{_CONSTRAINT_BYTES[out.constraint]}>({out.expr}, __gpuedu_out[0]);" + " }")


def _need_output(st, op, opcode):
    if not op.mode:
        raise Refused(f"{opcode} writes %{op.number}, an input: bind it as an output (\"={op.constraint}\")", st.line)


# ---- the tensor copies ---------------------------------------------------------------------------------------
_TENSOR_OPERAND = re.compile(r"\[\s*(?P<map>%\d+|%\[\w+\])\s*,\s*\{(?P<coords>[^{}]*)\}\s*\]")


def _tensor_copy_code(st, opcode, match, parts, op):
    """The C++ for cp.async.bulk.tensor: a load ([dst], [map, {c0, ...}], [mbar]) or a store ([map, {c0, ...}],
    [src]), run by gpuedu_tma.h with the rank as its modifier."""
    rank, load = int(match["rank"]), op == "TMA_LOAD"
    multicast = load and bool(match["multicast"])
    shape = ("[dst], [map, {c0, ...}], [mbar], ctaMask" if multicast else "[dst], [map, {c0, ...}], [mbar]") if load \
        else "[map, {c0, ...}], [src]"
    if len(parts) != (3 + multicast if load else 2):
        raise Refused(f"{opcode} takes {shape}, got {len(parts)} operand{'s' if len(parts) != 1 else ''}: "
                      f"{', '.join(parts) or '(none)'} (the emulator runs no .L2::cache_hint)", st.line)
    tensor = _TENSOR_OPERAND.fullmatch((parts[1] if load else parts[0]).strip())
    if not tensor:
        raise Refused(f"{opcode}: the tensor operand {(parts[1] if load else parts[0]).strip()!r} must be "
                      f"[%map, {{%c0, ...}}]: the tensor map's address and {rank} coordinate"
                      f"{'s' if rank > 1 else ''}", st.line)
    coords = [t.strip() for t in tensor["coords"].split(",")]
    if len(coords) != rank:
        raise Refused(f"{opcode} is a .{rank}d copy, which takes {rank} coordinate{'s' if rank > 1 else ''}, "
                      f"got {len(coords)}: {{{tensor['coords'].strip()}}}", st.line)
    tmap = st.ref(tensor["map"], opcode)
    if tmap.constraint != "l" or tmap.mode == "=":
        raise Refused(f"{opcode}: the tensor map %{tmap.number} is bound with \"{tmap.mode}{tmap.constraint}\"; pass "
                      f"the address of the kernel's `const __grid_constant__ CUtensorMap` parameter as a 64-bit input, "
                      f"\"l\"(reinterpret_cast<unsigned long long>(&map))", st.line)
    values = [f"::__gpuedu::ptx::in<8>({tmap.expr})"] + [st.source(st.ref(t, opcode), opcode, 32) for t in coords]
    if load:
        sources = [_address(st, parts[0], opcode, "shared"), *values, _address(st, parts[2], opcode, "shared")]
        if multicast:
            sources.append(st.source(st.ref(parts[3].strip(), opcode), opcode, 16))
    else:
        sources = [*values, _address(st, parts[1], opcode, "shared")]
    return ("{ " + f"const unsigned long long __gpuedu_in[{len(sources)}] = {{{', '.join(sources)}}}; "
            f"__gpuedu_ptx_run(::__gpuedu::ptx::{op}, {rank | multicast << 3}, nullptr, __gpuedu_in, {st.line});"
            + " }")


# ---- an mbarrier wait's idioms ------------------------------------------------------------------------------
_SCOPES_REFUSED = ("register declarations and { } scopes in inline PTX are not supported by the emulator, but for "
                   "an mbarrier wait's two forms:\n    " + "\n    ".join(WAIT_IDIOMS) + "\nElsewhere bind every "
                   "value to a C++ variable with an operand (%0, %1, ...)")
_NAME = r"[A-Za-z_$][\w$]*"
_SCOPED_WAIT = re.compile(rf"\{{\s*\.reg\s+\.pred\s+(?P<p>{_NAME})\s*;\s*(?:(?P<top>{_NAME})\s*:\s*)?"
                          rf"(?P<wait>mbarrier\.\S+)\s+(?P<pred>{_NAME})\s*,\s*(?P<rest>[^;]*?)\s*;\s*"
                          rf"(?P<tail>[^{{}}]*?)\s*\}}\s*", re.S)
_SELP = re.compile(rf"selp\.(?:b32|u32|s32)\s+(?P<dst>%\d+|%\[\w+\])\s*,\s*1\s*,\s*0\s*,\s*(?P<p>{_NAME})\s*;")
_LOOP_OUT = re.compile(rf"@(?P<p>{_NAME})\s+bra(?:\.uni)?\s+(?P<done>{_NAME})\s*;\s*bra(?:\.uni)?\s+(?P<top>{_NAME})"
                       rf"\s*;\s*(?P<end>{_NAME})\s*:")
_LOOP_BACK = re.compile(rf"@!(?P<p>{_NAME})\s+bra(?:\.uni)?\s+(?P<top>{_NAME})\s*;")


_SCOPED_WGMMA = re.compile(rf"\{{\s*\.reg\s+\.pred\s+(?P<p>{_NAME})\s*;\s*setp\.ne\.(?:b32|s32|u32)\s+(?P<set>{_NAME})\s*,"
                           rf"\s*(?P<x>%\d+|%\[\w+\])\s*,\s*0\s*;\s*(?P<mma>wgmma\.mma_async\S*)\s+(?P<rest>[^;]*?)\s*;"
                           rf"\s*\}}\s*", re.S)


def _scoped_wgmma(st, m, sm):
    """The C++ for the scale-d idiom of public wgmma code: { .reg .pred p; setp.ne.b32 p, %x, 0; wgmma.mma_async d,
    a, b, p, ...; }, scale-d the value of %x != 0 when it runs."""
    parts = _ptx_operands(m["rest"])
    if m["set"] != m["p"] or len(parts) < 4 or parts[3].strip() != m["p"]:
        raise Refused(_SCOPES_REFUSED, st.line)
    x = st.ref(m["x"], m["mma"])
    value = st.source(x, "setp.ne.b32", 32)
    text = f"{m['mma']} " + ", ".join(parts[:3] + ["1"] + parts[4:])   # (checked with scale-d 1, then replaced)
    return _instruction_code(st, text, sm, scale_d_predicate=value)


def _scoped_wait(st, template, sm, profile):
    """The C++ for a statement that is a { } scope: one of WAIT_IDIOMS or the wgmma scale-d idiom, else refused."""
    if (w := _SCOPED_WGMMA.fullmatch(template.strip())):
        return _scoped_wgmma(st, w, sm)
    m = _SCOPED_WAIT.fullmatch(template.strip())
    if m and m["pred"] == m["p"]:
        tail = m["tail"]
        if not m["top"] and (selp := _SELP.fullmatch(tail)) and selp["p"] == m["p"]:
            return _instruction_code(st, f"{m['wait']} {selp['dst']}, {m['rest']}", sm, profile, idiom="value")
        out, back = _LOOP_OUT.fullmatch(tail), _LOOP_BACK.fullmatch(tail)
        if m["top"] and ((out and out["p"] == m["p"] and out["top"] == m["top"] and out["end"] == out["done"])
                         or (back and back["p"] == m["p"] and back["top"] == m["top"])):
            return _instruction_code(st, f"{m['wait']} {m['rest']}", sm, profile, idiom="loop")
    raise Refused(_SCOPES_REFUSED, st.line)


# ---- wgmma ------------------------------------------------------------------------------------------------
def _ptxas_name(opcode, kind=True):
    """How ptxas names an instruction in its refusals: of a target or a value, with its kind ("wgmma.mma_async with
    floating point types"); of its arguments' number or kinds (``kind=False``), without."""
    name = opcode.split(".sync")[0]
    if kind and name == "wgmma.mma_async" and not re.search(r"\.(?:s8|u8|b1)\b", opcode):
        name += " with floating point types"
    return name


def _wgmma_immediate(st, text, opcode, what, allowed=None, argument=None):
    """The value of an immediate operand of a wgmma instruction: a literal, or an "n" operand whose expression is an
    integer literal (or true / false), read before compiling as ptxas reads it; ``allowed``: the values ptxas takes
    (``argument``, its place among the operands, names it in ptxas's words)."""
    text = text.strip()
    if re.fullmatch(r"-?(?:0[xX][0-9a-fA-F]+|\d+)", text):
        value = int(text, 0)
    elif re.fullmatch(r"%(?:\d+|\[\w+\])", text):
        o = st.ref(text, opcode)
        if o.constraint not in "ni":
            mismatch = f"Arguments mismatch for instruction '{_ptxas_name(opcode, False)}'"
            raise Refused(f"{opcode}: {what} (%{o.number}, {o.expr}) is bound with \"{o.constraint}\", a register, "
                          f"where ptxas takes an immediate (\"{mismatch}\"): write the number, or bind it with \"n\""
                          + _SCALE_D_HINT.get(what, ""), st.line)
        expr = o.expr.strip()
        value = {"true": 1, "false": 0}.get(expr)
        if value is None:
            try:
                value = int(expr.rstrip("uUlL"), 0)
            except ValueError:
                # a constant nvcc knows and Python does not (a template parameter, a constexpr): its value is read
                # when the instruction runs, and checked there as ptxas checks it when it compiles the instance
                return RuntimeValue(expr)
    else:
        raise Refused(f"{opcode}: {what} {text!r} is not an immediate the emulator takes: write a number (or %N bound "
                      f"with \"n\")" + _SCALE_D_HINT.get(what, ""), st.line)
    if allowed == "non-negative":
        bad, expected = value < 0, "non-negative integer"
    else:
        bad, expected = bool(allowed) and value not in allowed, " or ".join(str(v) for v in allowed or ())
    if bad:
        raise Refused(f"{opcode}: {what} is {value}; ptxas refuses it (\"Argument {argument} of instruction "
                      f"'{_ptxas_name(opcode)}': unexpected value '{value}', expected to be {expected}\")", st.line)
    return value


@dataclass(frozen=True)
class RuntimeValue:
    """An immediate whose value is a C++ constant expression the rewrite cannot read (a template parameter): read
    when the instruction runs (``expr``), and checked there."""
    expr: str


def _runtime_bit(value, plus_minus_one, what, st):
    """C++ for an immediate's bit in the modifiers: 1 for 1 (for imm-scale: for -1), checked when it runs."""
    return (f"::__gpuedu::ptx::wgmma_bit((long long)({value.expr}), {'true' if plus_minus_one else 'false'}, "
            f"\"{what}\", {st.line})")


_SCALE_D_HINT = {"scale-d": ". (scale-d is a predicate: 1 accumulates, D = A B + D; 0 overwrites, D = A B. To choose "
                            "at run time, set a predicate from a register inside the statement, as public kernels "
                            "do: " + "{ .reg .pred p; setp.ne.b32 p, %N, 0; wgmma.mma_async... d, a, b, p, 1, 1, 0, 1; }"
                            + ")"}


def _wgmma_code(st, opcode, match, parts, op, scale_d_predicate=None):
    """The C++ for a wgmma instruction (or fence.proxy.async): mma_async a call of __gpuedu_ptx_group with its
    operands (the accumulators read too when scale-d may be 1); the others checked, with nothing to run.
    ``scale_d_predicate``: the operand whose value != 0 is scale-d (the predicate idiom, _scoped_wgmma)."""
    if op in ("WGMMA_FENCE", "WGMMA_COMMIT", "FENCE_PROXY_ASYNC"):
        if parts:
            raise Refused(f"{opcode} takes no operands, got {', '.join(parts)}", st.line)
        return "{ }"
    if op == "WGMMA_WAIT":
        if len(parts) != 1:
            raise Refused(f"{opcode} takes 1 operand (N, an integer constant), got {len(parts)}", st.line)
        n = _wgmma_immediate(st, parts[0], opcode, "N", "non-negative", 0)
        if isinstance(n, RuntimeValue):      # (nothing to wait for: checked when it runs)
            return "{ " + f"::__gpuedu::ptx::wgmma_wait_count((long long)({n.expr}), {st.line});" + " }"
        return "{ }"
    n, k, types = int(match["n"]), int(match["k"]), (match["d"], match["a"], match["b"])
    if k != 16 or types not in (("f32", "f16", "f16"), ("f32", "bf16", "bf16")):
        raise Refused(f"{opcode}: the emulator runs wgmma.mma_async .m64nNk16 with .f32 accumulators and .f16 or .bf16 "
                      f"inputs (.f32.f16.f16, .f32.bf16.bf16); k{k}.{'.'.join(types)} is not one of them", st.line)
    if n % 8 or not 8 <= n <= 256:
        raise Refused(f"{opcode}: N is {n}; wgmma's shapes are m64nNk16 with N a multiple of 8 from 8 to 256", st.line)
    a_regs = len(parts) > 1 and parts[1].startswith("{")
    if len(parts) != (7 if a_regs else 8):
        raise Refused(f"{opcode} takes 8 operands with A in shared memory (d, a-desc, b-desc, scale-d, imm-scale-a, "
                      f"imm-scale-b, imm-trans-a, imm-trans-b) or 7 with A in registers (d, {{a0, a1, a2, a3}}, "
                      f"b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-b), got {len(parts)} (ptxas: \"Arguments "
                      f"mismatch for instruction 'wgmma.mma_async'\")", st.line)
    if scale_d_predicate is not None:
        scale_d = RuntimeValue(f"(({scale_d_predicate}) != 0)")
    else:
        scale_d = _wgmma_immediate(st, parts[3], opcode, "scale-d", (0, 1), 3)
    negate_a = _wgmma_immediate(st, parts[4], opcode, "imm-scale-a", (-1, 1), 4)
    negate_b = _wgmma_immediate(st, parts[5], opcode, "imm-scale-b", (-1, 1), 5)
    trans_a = 0 if a_regs else _wgmma_immediate(st, parts[6], opcode, "imm-trans-a", (0, 1), 6)
    trans_b = _wgmma_immediate(st, parts[-1], opcode, "imm-trans-b", (0, 1), len(parts) - 1)
    # each modifier's bit: a number's now, a runtime value's when it runs (wgmma_bit checks it as ptxas would)
    bits = {8: (scale_d, False, "scale-d"), 9: (negate_a, True, "imm-scale-a"), 10: (negate_b, True, "imm-scale-b"),
            11: (trans_a, False, "imm-trans-a"), 12: (trans_b, False, "imm-trans-b")}
    fixed, runtime = 0, []
    for shift, (value, plus_minus_one, what) in bits.items():
        if isinstance(value, RuntimeValue):
            runtime.append(f"({_runtime_bit(value, plus_minus_one, what, st)} << {shift})")
        else:
            fixed |= (value == -1 if plus_minus_one else value) << shift
    reads_d = isinstance(scale_d, RuntimeValue) or scale_d == 1
    sources, writes = [], []
    for j, token in enumerate(_vector(st, parts[0], n // 2, opcode)):
        o = st.ref(token, opcode)
        if not o.mode:
            raise Refused(f"{opcode} writes %{o.number}, an input: bind the accumulators as outputs (\"+f\")", st.line)
        st.check_size(o, opcode, 32)
        if reads_d:   # D = A B + D reads them (an "=f" one is refused there: its value would not be passed in)
            sources.append(st.source(o, opcode, 32))
        writes.append(f"::__gpuedu::ptx::out<{_CONSTRAINT_BYTES[o.constraint]}>({o.expr}, __gpuedu_out[{j}]);")
    a_tokens = _vector(st, parts[1], 4 if a_regs else 1, opcode)
    sources += [st.source(st.ref(t, opcode), opcode, 32 if a_regs else 64) for t in a_tokens]
    sources.append(st.source(st.ref(_vector(st, parts[2], 1, opcode)[0], opcode), opcode, 64))
    mods = n // 8 | (match["a"] == "bf16") << 6 | a_regs << 7 | fixed | reads_d << 13
    if runtime:
        mods = f"(int)({mods}u | " + " | ".join(runtime) + ")"
    return ("{ " + f"const unsigned long long __gpuedu_in[{len(sources)}] = {{{', '.join(sources)}}}; "
            f"unsigned long long __gpuedu_out[{n // 2}]; "
            f"__gpuedu_ptx_group(::__gpuedu::ptx::WGMMA_MMA, {mods}, __gpuedu_out, __gpuedu_in, {st.line}); "
            + " ".join(writes) + " }")


# ---- the rewrite ------------------------------------------------------------------------------------------
def _target(sm):
    return str(sm) if isinstance(sm, Target) else f"sm_{int(sm)}"


def rewrite(source, sm=DEFAULT_SM, profile=False):
    """``source`` with each asm statement replaced by the runtime's calls, every line kept where it was;
    ``profile``: for the profiled build, each memory access of an instruction also told to the counters there.

    Raises ``Refused`` (with the line) for an instruction outside ``INSTRUCTIONS`` or not in architecture
    ``sm``, or operands that do not fit it."""
    if "asm" not in source:
        return source                           # (most kernels: no statement to look for)
    blank = _blank(source)
    out, last = [], 0
    for m in _ASM.finditer(blank):
        if m.start() < last:
            continue
        open_paren = m.end() - 1
        close = _matching(blank, open_paren)
        line = source.count("\n", 0, m.start()) + 1
        if close is None:
            raise Refused("an asm statement without its closing parenthesis", line)
        inner, inner_blank = source[open_paren + 1:close], blank[open_paren + 1:close]
        sections = _split(inner, inner_blank, ":")
        template = _template(*sections[0], line)
        if not template.strip():
            continue                            # asm volatile("" ::: "memory"): the C++ compiler's
        if "goto" in m["quals"]:
            raise Refused("asm goto is not supported by the emulator", line)
        outputs = _operands(*sections[1], 0, line, [], False) if len(sections) > 1 else []
        inputs = _operands(*sections[2], len(outputs), line, outputs, True) if len(sections) > 2 else []
        st = _Statement(outputs + inputs, line)
        if template.lstrip().startswith("{"):     # a scope: an mbarrier wait's idiom, or refused
            code = _scoped_wait(st, template.replace("\n", " "), sm, profile)
        else:
            pieces = [p for p in re.split(r";", template.replace("\n", " ")) if p.strip()]
            code = " ".join(_instruction_code(st, piece, sm, profile) for piece in pieces)
        span = source[m.start():close + 1]
        breaks = "".join("\\\n" if span[k - 1:k] == "\\" else "\n" for k, ch in enumerate(span) if ch == "\n")
        out.append(source[last:m.start()])
        out.append(f"do {{ {code} }} while (0)" + (" " + breaks if breaks else ""))
        last = close + 1
    out.append(source[last:])
    return "".join(out)


_ARCH = re.compile(r"(?:sm|compute)_(\d+)([af]?)")


def architecture(arch=None, options=()):
    """The architecture a module is built for (a ``Target``: its sm number, and whether it is the "a" one):
    ``arch`` ("sm_80", "sm_90a"), else the last -arch / --gpu-architecture / -gencode in the nvcc ``options``, else
    the emulated device's (DEFAULT_SM). Raises ValueError for a value that names none."""
    given = []
    if arch:
        given.append(str(arch))
    opts = list(options or ())
    for k, opt in enumerate(opts):
        opt = str(opt)
        if opt in ("-arch", "--gpu-architecture", "-gencode", "--generate-code") and k + 1 < len(opts):
            given.append(str(opts[k + 1]))
        elif opt.startswith(("-arch=", "--gpu-architecture=", "-gencode=", "--generate-code=")):
            given.append(opt.split("=", 1)[1])
        elif opt.startswith("-arch") and len(opt) > 5:
            given.append(opt[5:])
    if not given:
        return Target(DEFAULT_SM)
    found = _ARCH.findall(given[-1])
    if not found:
        raise ValueError(f"cannot read an architecture from {given[-1]!r}: write it as sm_80, sm_90 or sm_90a")
    number, suffix = max(((int(n), suffix) for n, suffix in found), key=lambda f: (f[0], f[1] == "a"))
    return Target(number, suffix == "a")
