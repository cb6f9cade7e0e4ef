"""The emulator on toolchains other than the one it was built on: C libraries that declare C23's math
functions, g++ that links libstdc++ statically, distributions' hardening flags, and the link check's reading
of the names a C library gives its functions.

CI runs the whole of tests/emulator on several toolchains (README.md, "Platforms"); these tests bring the
failures seen on those toolchains to every one of them.
"""
import os
import platform
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from gpuedu.emulator import _linkcheck, compiler
from gpuedu.emulator import driver as drv
from gpuedu.emulator.compiler import SourceModule

# C23's math functions that glibc 2.36 does not declare, and later C libraries do (glibc 2.41: the *pi
# functions; 2.42: rsqrt, pown, powr, rootn, compoundn...); {T} is each of float, double and long double.
C23_NEW_MATH = {
    "acospi": "{T}", "asinpi": "{T}", "atanpi": "{T}", "atan2pi": "{T}, {T}", "cospi": "{T}", "sinpi": "{T}",
    "tanpi": "{T}", "exp10m1": "{T}", "exp2m1": "{T}", "log10p1": "{T}", "log2p1": "{T}", "logp1": "{T}",
    "compoundn": "{T}, long long", "pown": "{T}, long long", "powr": "{T}, {T}", "rootn": "{T}, long long",
    "rsqrt": "{T}",
}


def _c23_header(path):
    """What such a C library's <math.h> declares, as glibc declares it in C++ (C linkage, noexcept)."""
    lines = ['extern "C" {']
    for name, params in C23_NEW_MATH.items():
        for T, suffix in (("double", ""), ("float", "f"), ("long double", "l")):
            lines.append(f"{T} {name}{suffix}({params.format(T=T)}) noexcept;")
    lines.append("}")
    path.write_text("\n".join(lines) + "\n")
    return path


MATH_KERNEL = r"""
__global__ void k(float* out, double* wide) {
    float s, c;
    sincospif(0.25f, &s, &c);
    out[0] = rsqrtf(4.0f); out[1] = sinpif(0.5f); out[2] = cospif(1.0f); out[3] = s * s + c * c;
    wide[0] = rsqrt(16.0); wide[1] = sinpi(1.5); wide[2] = cospi(2.0);
}
"""


def test_a_c_library_that_declares_c23s_math_functions_leaves_every_kernel_compiling(context, tmp_path,
                                                                                     monkeypatch):
    # glibc 2.41 (Debian 13) declares sinpif and cospif, and a prelude that defined them again as static
    # functions failed every kernel: "'float sinpif(float)' was declared 'extern' and later 'static'".
    header = _c23_header(tmp_path / "c23_math.h")
    monkeypatch.setenv("GPUEDU_CXXFLAGS", f"-include {header}")
    mod = SourceModule(MATH_KERNEL)
    out, wide = np.zeros(4, np.float32), np.zeros(3, np.float64)
    mod.get_function("k")(drv.Out(out), drv.Out(wide), block=(1, 1, 1))
    np.testing.assert_allclose(out, [0.5, 1.0, -1.0, 1.0], rtol=1e-6)
    np.testing.assert_allclose(wide, [0.25, -1.0, 1.0], rtol=1e-15)


def test_the_cuda_names_c23_shares_are_the_emulators_own_functions(context):
    # The same results whatever the C library declares: these never call a C library's sinpif or rsqrtf.
    mod = SourceModule(MATH_KERNEL)
    out, wide = np.zeros(4, np.float32), np.zeros(3, np.float64)
    mod.get_function("k")(drv.Out(out), drv.Out(wide), block=(1, 1, 1))
    assert out.tolist()[:3] == [0.5, 1.0, -1.0] and wide.tolist() == [0.25, -1.0, 1.0]
    undefined = _linkcheck.undefined_symbols(compiler.build(MATH_KERNEL))
    assert undefined and not {"sinpif", "cospif", "rsqrtf", "rsqrt", "sinpi", "cospi"} & undefined


REFUSALS = textwrap.dedent(r'''
    import sys
    import numpy as np
    from gpuedu.emulator import driver as drv
    from gpuedu.emulator.compiler import SourceModule
    drv.init()
    ctx = drv.Device(0).make_context()
    for body in ("exit(3);", "throw 1;", "x[0] = helper(x[1]);"):
        try:
            SourceModule("#include <cstdlib>\n__device__ float helper(float);\n"
                         'extern "C" __global__ void bad(float* x) { ' + body + " }", no_extern_c=True)
            print("NOT REFUSED", body)
        except drv.CompileError as exc:
            print("refused:", " ".join(str(exc).split())[:120])
    good = SourceModule("__global__ void good(int* x) { x[threadIdx.x] = 7; }").get_function("good")
    out = np.zeros(4, np.int32)
    good(drv.Out(out), block=(4, 1, 1))
    print("afterwards:", out.tolist())
''')


def test_a_toolchain_that_links_libstdcxx_into_the_module_is_not_refused(tmp_path):
    # Ubuntu 24.04's g++ on the course's GPU machine linked libstdc++ into each module, whose unwinder and
    # demangler call abort, fputs, strlen, __isoc23_strtoul...: every kernel was refused as if the learner
    # had called them. The learner's object file is what is judged, so only the learner's calls count.
    env = dict(os.environ, GPUEDU_CACHE_DIR=str(tmp_path / "cache"), GPUEDU_CXXFLAGS="-static-libstdc++")
    done = subprocess.run([sys.executable, "-c", REFUSALS], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert "NOT REFUSED" not in done.stdout
    assert lines[0].startswith("refused: error: kernel code calls the host function exit:"), lines
    assert lines[1].startswith("refused: error: kernel code uses C++ exceptions"), lines
    assert lines[2].startswith("refused: error: kernel code refers to helper(float)"), lines
    assert "afterwards: [7, 7, 7, 7]" in done.stdout


def test_names_as_a_c_library_spells_them_are_judged_as_the_source_wrote_them():
    assert _linkcheck.source_name("__isoc23_strtoul") == "strtoul"
    assert _linkcheck.source_name("__isoc99_sscanf") == "sscanf"
    assert _linkcheck.source_name("__memcpy_chk") == "memcpy"
    assert _linkcheck.source_name("__fprintf_chk") == "fprintf"
    assert _linkcheck.source_name("_ZGVbN4v_sinf") == "sinf"
    assert _linkcheck.source_name("__expf_finite") == "expf"
    for kept in ("__stack_chk_fail", "__chk_fail", "memcpy", "_Z6helperf", "__cxa_throw"):
        assert _linkcheck.source_name(kept) == kept
    # what a fortified or C23 build of the learner's own calls refers to: refused or allowed as the call is
    problems = _linkcheck.problems({"__isoc23_strtoul", "__fprintf_chk", "__printf_chk", "__memcpy_chk",
                                    "_Unwind_Resume", "__gxx_personality_v0", "_GLOBAL_OFFSET_TABLE_"})
    assert len(problems) == 1 and problems[0].startswith("kernel code calls the host functions fprintf, strtoul:")
    assert _linkcheck.problems({"__printf_chk", "__vsnprintf_chk", "__stack_chk_fail", "_Unwind_Resume"}) == []


def test_a_local_object_with_a_destructor_or_a_virtual_function_is_not_taken_for_an_exception(context):
    # Cleanups reference the unwinder (_Unwind_Resume, the personality routine) with no throw anywhere;
    # a class with virtual functions references the type-information vtables. nvcc takes both.
    mod = SourceModule(r"""
    struct Shape { __device__ virtual float area() const = 0; __device__ virtual ~Shape() {} };
    struct Square : Shape { float s; __device__ Square(float s) : s(s) {} __device__ float area() const { return s * s; } };
    struct Note { int* p; __device__ ~Note() { p[1] += 1; } };
    __device__ float measure(const Shape& shape) { return shape.area(); }
    extern "C" __global__ void k(float* out, int* count) {
        Note note{count};
        Square sq(3.0f);
        out[threadIdx.x] = measure(sq);
        printf("");
    }""", no_extern_c=True)
    out, count = np.zeros(2, np.float32), np.zeros(2, np.int32)
    mod.get_function("k")(drv.Out(out), drv.InOut(count), block=(2, 1, 1))
    assert out.tolist() == [9.0, 9.0] and count.tolist() == [0, 2]


HARDENED = textwrap.dedent(r'''
    import numpy as np
    from gpuedu.emulator import driver as drv, gpuarray
    from gpuedu.emulator.compiler import SourceModule
    drv.init()
    ctx = drv.Device(0).make_context()
    mod = SourceModule(r"""
    #include <cstring>
    __global__ void reduce(float* out, const float* x) {           // fibers: a barrier per step
        __shared__ float s[64];
        s[threadIdx.x] = x[threadIdx.x];
        __syncthreads();
        for (int k = 32; k > 0; k >>= 1) { if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k]; __syncthreads(); }
        if (threadIdx.x == 0) out[0] = s[0];
    }
    __global__ void local_overrun(float* out, const char* src, int n) {   // fortified memcpy would abort()
        char tmp[8];
        memcpy(tmp, src, n);
        out[threadIdx.x] = tmp[1];
    }
    __global__ void shared_overrun(float* out) {
        __shared__ float s[32];
        s[threadIdx.x + 32] = 1.0f;
        __syncthreads();
        out[threadIdx.x] = s[threadIdx.x];
    }
    __global__ void one_past(float* out) { out[threadIdx.x + 1] = 1.0f; }   // the watched slack
    __noinline__ __device__ int deep(int d, volatile char* up) {
        volatile char pad[4096]; pad[0] = (char)d;
        int r = d <= 0 ? 0 : deep(d - 1, pad);
        return r + pad[0] + up[0];
    }
    __global__ void recurse(int* out, int d) {                      // stack-clash probes meet the guard page
        volatile char top[1] = {0};
        __syncthreads();
        out[0] = deep(d, top);
    }
    """)
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    mod.get_function("reduce")(drv.Out(out), drv.In(x), block=(64, 1, 1))
    print("reduce:", out[0])
    src = np.zeros(256, np.int8)
    for name, args, block in [("local_overrun", (drv.Out(out), drv.In(src), np.int32(200)), 4),
                              ("shared_overrun", (drv.Out(out),), 4),
                              ("one_past", (gpuarray.zeros(5, np.float32),), 5),
                              ("recurse", (drv.Out(np.zeros(1, np.int32)), np.int32(100000)), 2)]:
        try:
            mod.get_function(name)(*args, block=(block, 1, 1))
            print(name, "NO ERROR")
        except drv.LaunchError as exc:
            print(name, "LaunchError:", " ".join(str(exc).split())[:160])
    mod.get_function("reduce")(drv.Out(out), drv.In(x), block=(64, 1, 1))
    print("afterwards:", out[0])
''')

# Ubuntu's g++ defaults (gcc -Q --help=...; Ubuntu's "hardening" wiki), given explicitly and after the
# emulator's own flags: stricter than a distribution's defaults, which the command line can override. The
# control-flow protection is the CPU's own: CET's on x86-64, PAC and BTI's on arm64 (as scripts/hardened-g++).
UBUNTU_HARDENING = "-D_FORTIFY_SOURCE=3 -fstack-protector-strong -fstack-clash-protection " + (
    "-mbranch-protection=standard" if platform.machine() == "aarch64" else "-fcf-protection")


def test_fibers_guards_and_the_watched_slack_hold_under_ubuntus_hardening_flags(tmp_path):
    env = dict(os.environ, GPUEDU_CACHE_DIR=str(tmp_path / "cache"), GPUEDU_CXXFLAGS=UBUNTU_HARDENING)
    done = subprocess.run([sys.executable, "-c", HARDENED], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "reduce: 2016.0" in out and "afterwards: 2016.0" in out, out
    assert "local_overrun LaunchError:" in out and "wrote past the end of a local array" in out, out
    assert "shared_overrun LaunchError:" in out and "wrote past the end of the" in out, out
    assert "one_past LaunchError:" in out and "wrote past the end of a 20-byte allocation" in out, out
    assert "recurse LaunchError:" in out and "overflowed its stack" in out, out
    assert "NO ERROR" not in out


def test_the_toolchain_check_passes_here_and_reports_a_wrong_result(context, monkeypatch):
    assert compiler.check_toolchain() is None
    # a module that builds and runs but computes wrong (as a miscompiling toolchain would)
    monkeypatch.setattr(compiler, "_CANARY", compiler._CANARY.replace("tile[0] * sinpif(0.5f)", "tile[0] * 0.5f"))
    problem = compiler.check_toolchain()
    assert problem.startswith("a test kernel built with this toolchain (") and "gave wrong results" in problem
    assert "a reduction of 0..127 gave 2032, not 4064" in problem
