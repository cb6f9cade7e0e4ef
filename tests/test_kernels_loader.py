"""The kernel loader: finding files, reading them, bad names, memoised compilation."""
import os
import re

import pytest

from gpuedu import kernels


def test_dir_holds_common_header():
    assert os.path.isfile(os.path.join(kernels.DIR, "common.cuh"))


def test_names_lists_every_cu_file_without_suffix():
    on_disk = sorted(f[:-3] for f in os.listdir(kernels.DIR) if f.endswith(".cu"))
    assert kernels.names() == on_disk
    assert all(not n.endswith(".cu") for n in kernels.names())


def test_path_accepts_name_with_or_without_suffix():
    for name in kernels.names():
        assert kernels.path(name) == kernels.path(name + ".cu")
        assert kernels.source(name).strip(), f"{name}.cu is empty"


def test_unknown_name_says_what_exists():
    with pytest.raises(FileNotFoundError, match="no kernel file 'no_such_op.cu'"):
        kernels.path("no_such_op")


def test_bad_name_type():
    with pytest.raises(TypeError, match="non-empty string"):
        kernels.path(3)


def test_options_as_string_is_rejected():
    with pytest.raises(TypeError, match="list or tuple"):
        kernels.load("reduction", options="-DX=1")


def test_every_kernel_file_declares_extern_c_kernels():
    # Convention: kernels are extern "C" so that names stay plain under no_extern_c=True.
    for name in kernels.names():
        src = kernels.source(name)
        for line in src.splitlines():
            stripped = line.strip()
            if stripped.startswith("__global__"):
                raise AssertionError(f"{name}.cu: kernel without extern \"C\": {stripped}")


def test_function_source_returns_one_whole_function_with_its_comment():
    text = kernels.function_source("reduction", "reduce_kernel3")
    assert text.startswith('extern "C" __global__ void reduce_kernel3(')
    assert text.rstrip().endswith("}") and "reduce_kernel4" not in text
    assert text.count("{") == text.count("}")
    bounded = kernels.function_source("mma_gemm", "mma_gemm_kernel6")   # declared with __launch_bounds__
    assert "__launch_bounds__(MMA_THREADS) mma_gemm_kernel6(" in bounded and bounded.startswith("//")
    assert "mma_gemm_kernel7" not in bounded and bounded.count("{") == bounded.count("}")
    helper = kernels.function_source("common.cuh", "warp_reduce_sum")
    assert helper.startswith("//") and "__shfl_down_sync" in helper
    with pytest.raises(KeyError, match="no function 'nope' in reduction.cu"):
        kernels.function_source("reduction", "nope")


def test_load_is_memoised_per_options_and_gives_plain_kernel_names():
    import gpuedu
    gpuedu.setup(verbose=False)
    first = kernels.load("copy_transpose")
    assert kernels.load("copy_transpose.cu") is first            # same file, same options: cached
    tiled16 = kernels.load("copy_transpose", options=["-DTILE=16"])
    assert tiled16 is not first and kernels.load("copy_transpose", ("-DTILE=16",)) is tiled16
    # extern "C" kernels keep their names: no C++ mangling to look up
    assert first.get_function("transpose_kernel3") is not None


def test_one_activation_table_for_every_kernel_and_for_python():
    import glob
    import os
    import re

    from gpuedu import kernels, nn, ops
    defined = {}
    for path in glob.glob(os.path.join(kernels.DIR, "*.cu*")):
        with open(path, encoding="utf-8") as f:
            for name in re.findall(r"^\s*#define (ACT_[A-Z_]+)\b", f.read(), re.M):
                defined.setdefault(name, []).append(os.path.basename(path))
    assert defined and all(files == ["activations.cuh"] for files in defined.values()), defined
    assert {f"ACT_{n.upper()}" for n in kernels.ACTIVATIONS} == set(defined)
    # Python's tables take their codes from it; only the set of names differs per kernel family
    assert all(ops.ACTIVATION_CODES[n] == kernels.ACTIVATIONS[n] for n in ops.ACTIVATION_CODES)
    assert all(nn.ACTIVATIONS[n] == kernels.ACTIVATIONS[n or "none"] for n in nn.ACTIVATIONS)
    for file in ("elementwise.cu", "nn_activations.cuh"):
        assert '#include "activations.cuh"' in kernels.source(file), file


def test_the_ladder_and_the_layers_apply_the_same_relu_sigmoid_and_tanh_for_a_code():
    import numpy as np

    from gpuedu import launch, nn, ops
    x = np.linspace(-3, 3, 64, dtype=np.float32).reshape(4, 16)
    for name, layer in (("relu", nn.ReLU()), ("sigmoid", nn.Sigmoid()), ("tanh", nn.Tanh())):
        np.testing.assert_allclose(layer.forward(launch.device_array(x)).get(), ops.activation(x, name).get(),
                                   rtol=1e-6, atol=1e-7, err_msg=name)


def kernel_parameter_lists(text):
    """{kernel name: [parameter declarations]} of every __global__ function in one file's source, with
    comments removed, continued macro lines joined and parameter-list macros (DENSE_FORWARD_ARGS) expanded."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text).replace("\\\n", " ")
    macros = dict(re.findall(r"^#define (\w+) ([^\n]+)$", text, re.M))
    found = {}
    pattern = r"__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(([^)]*)\)"
    for name, params in re.findall(pattern, text):
        params = macros.get(params.strip(), params)
        found[name] = [" ".join(p.split()) for p in params.split(",") if p.strip()]
    # a kernel a function-like macro declares, named by one of its parameters (PIPELINED_KERNEL(name, ...)):
    # each use of the macro at the start of a line declares that kernel under the name it is given
    for macro, formals, body in re.findall(r"^#define (\w+)\(([^)]*)\)([^\n]*)$", text, re.M):
        formals = [f.strip() for f in formals.split(",")]
        for name, params in re.findall(pattern, body):
            if name in formals and name in found:
                for actuals in re.findall(rf"^{macro}\(([^)]*)\)", text, re.M):
                    found[actuals.split(",")[formals.index(name)].strip()] = found[name]
    return found


def argument_order_problems(name, params):
    """What breaks common.cuh's parameter order in one kernel: a pointer after a size or scalar, or a
    written pointer after a read-only one. TMA tensor maps (CUtensorMap, by value) come before all of them: a
    CUtensorMap is 64-byte aligned, and PyCUDA packs the arguments one after another."""
    problems, seen_scalar, seen_const = [], None, None
    maps = [p for p in params if "CUtensorMap" in p]
    if params[:len(maps)] != maps:
        problems.append(f"{name}: a tensor map comes after `{params[0]}`: tensor maps go first")
    for p in params[len(maps):] if params[:len(maps)] == maps else params:
        if "*" in p:
            if seen_scalar:
                problems.append(f"{name}: pointer `{p}` comes after the non-pointer `{seen_scalar}`")
            if p.startswith("const "):
                seen_const = seen_const or p
            elif seen_const:
                problems.append(f"{name}: written pointer `{p}` comes after the read-only `{seen_const}`")
        else:
            seen_scalar = seen_scalar or p
    return problems


def test_the_parameter_order_check_sees_both_mistakes():
    found = kernel_parameter_lists('#define ARGS const float* a, float* b\n'
                                   'extern "C" __global__ void __launch_bounds__(64) f(ARGS) {}\n'
                                   'extern "C" __global__ void g(int n, float* y) {}\n'
                                   'extern "C" __global__ void h(float* y, const float* x, int n, float a) {}\n')
    assert found == {"f": ["const float* a", "float* b"], "g": ["int n", "float* y"],
                     "h": ["float* y", "const float* x", "int n", "float a"]}
    assert "after the read-only" in argument_order_problems("f", found["f"])[0]
    assert "after the non-pointer" in argument_order_problems("g", found["g"])[0]
    assert argument_order_problems("h", found["h"]) == []


def test_every_kernel_orders_its_parameters_as_common_cuh_says():
    # written pointers, then read-only pointers, then sizes, then other scalars (common.cuh, at the top)
    problems, kernels_seen = [], {}
    for filename in sorted(os.listdir(kernels.DIR)):
        if filename.endswith((".cu", ".cuh")):
            with open(os.path.join(kernels.DIR, filename), encoding="utf-8") as f:
                for name, params in kernel_parameter_lists(f.read()).items():
                    kernels_seen[name] = params
                    problems += argument_order_problems(f"{filename}: {name}", params)
    # the parser found the kernels of every form: plain, __launch_bounds__ with a macro list, a macro's body
    for name in ("matmul_kernel1", "dense_forward_128x128", "gemm_nt_64x16", "name", "softmax_xent", "sgd_update"):
        assert name in kernels_seen, f"the parameter check did not find {name}"
    assert len(kernels_seen["dense_forward_64x64"]) == 11          # the macro's list, expanded
    assert problems == [], "\n".join(problems)


def struct_letter(param):
    """The PyCUDA struct letter a launcher must give one declared kernel parameter."""
    if "*" in param:
        return "P"
    if "CUtensorMap" in param:
        return "T"          # a TMA tensor map, by value (launch.kernel's "T")
    words = param.replace("unsigned", "").split()[:-1]   # the type, without the parameter's name
    return {"int": "i", "float": "f", "double": "d"}[" ".join(words)]


KERNEL_CALL = re.compile(r"\.kernel\(\s*\"(\w+)\",\s*(f?)(\"[^\"]+\"|\w+),\s*\"([A-Za-z]+)\"")


def launcher_kernel_calls(root, folder="gpuedu"):
    """(file, line, kernel file, f, kernel name, signature) of every ``launch.kernel(...)`` under ``folder``
    (the package's launchers), and the ``.kernel(`` calls written in another form (a variable file or
    signature), which the check could not read."""
    calls, unreadable = [], []
    for dirpath, _, files in os.walk(os.path.join(root, folder)):
        if os.sep + "emulator" in dirpath:
            continue
        for filename in files:
            if not filename.endswith(".py"):
                continue
            where = os.path.relpath(os.path.join(dirpath, filename), root)
            with open(os.path.join(dirpath, filename), encoding="utf-8") as f:
                text = f.read()
            code = re.sub(r'"""[\s\S]*?"""', lambda m: "\n" * m.group(0).count("\n"), text)   # not docstrings
            code = re.sub(r"#[^\n]*", "", code)
            matched = set()
            for m in KERNEL_CALL.finditer(code):
                calls.append((where, code.count("\n", 0, m.start()) + 1) + m.groups())
                matched.add(m.start())
            unreadable += [f"{where}:{code.count(chr(10), 0, m.start()) + 1}: {code[m.start():m.start() + 60]!r}"
                           for m in re.finditer(r"\.kernel\(", code) if m.start() not in matched]
    return calls, unreadable


def test_every_prepared_signature_matches_its_kernel():
    # Every launcher names its kernel as launch.kernel("file", "name" or f"name{version}", "PPi"), literally,
    # and gives the kernel's declared parameters in their order: a launch in another order fails here, and so
    # does a call this check cannot read (a signature or file in a variable).
    declared = {}
    for name in kernels.names():
        declared[name] = {k: "".join(struct_letter(p) for p in params)
                          for k, params in kernel_parameter_lists(kernels.source(name)).items()}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    calls, unreadable = launcher_kernel_calls(root)
    package_calls = len(calls)
    for folder in ("tests", "benchmarks"):    # their literal calls are checked too (tests call it unprepared)
        calls += launcher_kernel_calls(root, folder)[0]
    assert unreadable == [], ("write launch.kernel's file, kernel name and signature as literals, so that "
                              "this test can check them:\n" + "\n".join(unreadable))
    problems, seen = [], set()
    for where, line, file, is_f, name, signature in calls:
        here = f"{where}:{line}: {file}.cu {name}"
        if file not in declared:
            problems.append(f"{here}: no kernel file {file}.cu")
            continue
        if name.startswith('"') and not is_f:   # a literal name: that kernel
            ok = declared[file].get(name.strip('"')) == signature
            seen.add(name.strip('"'))
        else:           # an f-string: one of the kernels the name can be
            pattern = re.sub(r"\\\{[^}]*\\\}", r"\\w+", re.escape(name.strip('"'))) if is_f else r"\w+"
            ok = any(re.fullmatch(pattern, k) and s == signature for k, s in declared[file].items())
            seen.update(k for k in declared[file] if re.fullmatch(pattern, k))
        if not ok:
            problems.append(f"{here}: launched as {signature!r}, declared {declared[file]}")
    assert problems == [], "\n".join(problems)
    # every family's launches are seen, conv2d.cu's and the layers' included
    assert package_calls >= 45, f"only {package_calls} launch signatures found: has the launchers' form changed?"
    for kernel in ("conv_kernel1", "conv_kernel2", "conv_im2col", "conv_backward_filter", "maxpool_backward",
                   "wmma_gemm_kernel2_tn", "wmma_gemm_kernel3_tt", "dense_forward_64x16", "gemm_nt_32x32",
                   "softmax_xent", "adam_update_multi", "update_loss_scale", "softmax_xent_half", "hgemm_tiled",
                   "mma_gemm_kernel6", "mma_gemm_kernel9", "mma_gemm_kernel10_nn", "mma_gemm_kernel10_tt",
                   "wgmma_gemm_kernel11", "wgmma_gemm_kernel12", "wgmma_gemm_kernel13"):
        assert kernel in seen, f"no launcher of {kernel} was seen"


def test_the_signature_check_reads_every_form_of_launch_kernel(tmp_path):
    package = tmp_path / "gpuedu" / "ops"
    package.mkdir(parents=True)
    (package / "family.py").write_text(
        'def f(version, signature):\n'
        '    """L.kernel("doc", "in_a_docstring", "P") is not a call"""\n'
        '    L.kernel("conv2d", "conv_kernel1", "PPPPiiiiiiiiiiii")\n'
        '    L.kernel("matmul",\n             f"matmul_kernel{version}", "PPPiii", options)\n'
        '    L.kernel("conv2d", "conv_relu_grad", signature)   # a variable signature\n')
    calls, unreadable = launcher_kernel_calls(str(tmp_path))
    assert [c[1:] for c in calls] == [(3, "conv2d", "", '"conv_kernel1"', "PPPPiiiiiiiiiiii"),
                                      (4, "matmul", "f", '"matmul_kernel{version}"', "PPPiii")]
    assert len(unreadable) == 1 and "family.py:6" in unreadable[0]


# ---- the constants Python takes from the kernels' source -----------------------------------------------

def test_define_reads_numbers_and_arithmetic_once_and_names_what_is_missing(monkeypatch):
    assert kernels.define("conv2d", "TILE_H") == 16
    assert kernels.define("conv2d.cu", "HALO_H") == (16 - 1) * 2 + 7           # arithmetic on other macros
    assert kernels.define("wmma_gemm", "V2_THREADS") == 256
    assert kernels.define("common.cuh", "WARP_SIZE") == 32
    with pytest.raises(LookupError, match=r"conv2d\.cu has no #define NO_SUCH_TILE"):
        kernels.define("conv2d", "NO_SUCH_TILE")
    with pytest.raises(ValueError, match=r"nn_activations\.cuh: #define NN_RSQRT2 .* is not integer arithmetic"):
        kernels.define("nn_activations.cuh", "NN_RSQRT2")
    with pytest.raises(FileNotFoundError, match="no kernel file 'no_such_file.cu'"):
        kernels.define("no_such_file", "TILE")
    with pytest.raises(LookupError, match=r"gemm_warptile\.cuh has no `using Tile1x1"):
        kernels.template_arguments("gemm_warptile.cuh", "Tile1x1")
    assert kernels.define("copy_transpose", "TILE") == 32
    reads = []
    monkeypatch.setattr(kernels, "source", lambda name: reads.append(name) or "#define A 1\n")
    assert kernels.define("copy_transpose", "TILE") == 32 and reads == []       # read once, already
    monkeypatch.setattr(kernels, "_defines", {})
    assert kernels.define("copy_transpose", "A") == kernels.define("copy_transpose", "A") == 1
    assert reads == ["copy_transpose.cu"]


def kernel_constants():
    """{where Python keeps it: (the value it uses, what the kernel source says)} for every tile size and
    similar constant a launcher takes from a kernel."""
    from gpuedu.ops import amp, attention, conv, copy_transpose, dense, fp16, gemm
    text = {name: kernels.source(name) for name in kernels.names()}
    text["gemm_warptile.cuh"] = kernels.source("gemm_warptile.cuh")

    def literal(file, macro):    # the number a #define spells out, read here independently of kernels.define
        return int(re.search(rf"^#define {macro} +(\d+)\b", text[file], re.M).group(1))

    def tile(alias):
        bm, bn, bk, wm, wn = map(int, re.search(rf"using {alias} = WarpTile<([\d, ]+)>", text["gemm_warptile.cuh"])
                                 .group(1).split(",")[:5])
        return bm, bn, bk, 32 * (bm // wm) * (bn // wn)
    t128 = tile("Tile128x128")
    v2 = {m: literal("wmma_gemm", m) for m in ("V2_BK", "V2_PAD", "V2_STAGES", "V2_WARPS_M", "V2_WARPS_N")}

    def shared(v):   # V2_SHARED_BYTES(bm, bn, bk, stages) of pipelined version v
        bm, bn, bk = (literal("wmma_gemm", f"V{v}_{m}") for m in ("BM", "BN", "BK"))
        halves = [max(w * (bk + v2["V2_PAD"]), bk * (w + v2["V2_PAD"])) for w in (bm, bn)]
        return literal("wmma_gemm", f"V{v}_STAGES") * sum(halves) * 2
    def mma(prefix, stages):   # mma_gemm.cu: (tile, threads, MMA_SHARED_BYTES or 0 for a static slice)
        bm, bn, bk, wm, wn = (literal("mma_gemm", f"{prefix}_{m}") for m in ("BM", "BN", "BK", "WARPS_M", "WARPS_N"))
        return (bm, bn), 32 * wm * wn, (literal("mma_gemm", stages) * (bm * bk + bk * bn) * 2 if stages else 0)
    return {
        "copy_transpose.TILE": (copy_transpose.TILE, literal("copy_transpose", "TILE")),
        "copy_transpose.BLOCK_ROWS": (copy_transpose.BLOCK_ROWS, literal("copy_transpose", "BLOCK_ROWS")),
        "gemm.TILE": (gemm.TILE, literal("matmul", "TILE")),
        "gemm.TILE4": (gemm.TILE4, {k: literal("matmul", m) for k, m in (("BM", "BM4"), ("BN", "BN4"), ("TM", "TM4"))}),
        "gemm.TILE5": (gemm.TILE5, {k: literal("matmul", m) for k, m in (("BM", "BM5"), ("BN", "BN5"), ("TM", "TM"),
                                                                           ("TN", "TN"))}),
        "gemm.TILE7": (gemm.TILE7, dict(zip(("BM", "BN", "BK", "THREADS"), t128))),
        "conv.TILE_H, TILE_W": ((conv.TILE_H, conv.TILE_W), (literal("conv2d", "TILE_H"), literal("conv2d", "TILE_W"))),
        "conv.MAX_KSIZE, MAX_STRIDE": ((conv.MAX_KSIZE, conv.MAX_STRIDE),
                                       (literal("conv2d", "CONV_MAX_KSIZE"), literal("conv2d", "CONV_MAX_STRIDE"))),
        "conv.CONST_FLOATS": (conv.CONST_FLOATS, literal("conv2d", "CONV_CONST_FLOATS")),
        "conv.GT": (conv.GT, literal("conv2d", "GT")),
        "conv.REDUCE_THREADS": (conv.REDUCE_THREADS, literal("conv2d", "REDUCE_THREADS")),
        "fp16.GEMM_TILE": (fp16.GEMM_TILE, (literal("fp16_gemm", "TILE_M"), literal("fp16_gemm", "TILE_N"))),
        "fp16.GEMM_THREADS": (fp16.GEMM_THREADS, (literal("fp16_gemm", "THREADS_X"), literal("fp16_gemm", "THREADS_Y"), 1)),
        "fp16.WMMA_BLOCK_TILE": (fp16.WMMA_BLOCK_TILE, (literal("wmma_gemm", "WMMA_M") * literal("wmma_gemm", "WARPS_M"),
                                                        literal("wmma_gemm", "WMMA_N") * literal("wmma_gemm", "WARPS_N"))),
        "fp16.WMMA_THREADS": (fp16.WMMA_THREADS, (32 * literal("wmma_gemm", "WARPS_M") * literal("wmma_gemm", "WARPS_N"),
                                                  1, 1)),
        "fp16.WMMA_PIPELINED": (fp16.WMMA_PIPELINED, {
            v: ((literal("wmma_gemm", f"V{v}_BM"), literal("wmma_gemm", f"V{v}_BN")),
                shared(v), 32 * literal("wmma_gemm", f"V{v}_WARPS_M") * literal("wmma_gemm", f"V{v}_WARPS_N"))
            for v in (2, 3)}),
        "fp16.WMMA_PIPELINED_THREADS": (fp16.WMMA_PIPELINED_THREADS, (32 * v2["V2_WARPS_M"] * v2["V2_WARPS_N"], 1, 1)),
        "fp16.MMA_GEMMS": (fp16.MMA_GEMMS, {6: mma("MMA", None), 7: mma("MMA", None), 8: mma("MMA", None),
                                            9: mma("MMA", "MMA_STAGES"), 10: mma("MMA10", "MMA10_STAGES")}),
        "fp16.HOPPER_GEMMS": (fp16.HOPPER_GEMMS, {
            11: ((literal("wgmma_gemm", "WG_BM"), literal("wgmma_gemm", "WG11_BN")),
                 literal("wgmma_gemm", "WG11_THREADS")),
            **{v: ((literal("wgmma_gemm", "WG_BM"), literal("wgmma_gemm", "WG12_BN")),
                   literal("wgmma_gemm", "WG12_THREADS")) for v in (12, 13)}}),
        "dense.GEMM_TILES": (dense.GEMM_TILES, tuple((n, *tile(f"Tile{n}")[:2], tile(f"Tile{n}")[3])
                                                     for n in ("128x128", "64x64", "32x32"))),
        "dense.NARROW_TILE": (dense.NARROW_TILE, ("64x16", *tile("Tile64x16")[:2], tile("Tile64x16")[3])),
        "dense.SLAB": (dense.SLAB, {tile(f"Tile{n}")[2] for n in ("128x128", "64x64", "32x32", "64x16")}.pop()),
        "dense.BIAS_COLS, BIAS_ROWS": ((dense.BIAS_COLS, dense.BIAS_ROWS),
                                       (literal("nn_dense", "BIAS_COLS"), literal("nn_dense", "BIAS_ROWS"))),
        "amp.SUM_THREADS": (amp.SUM_THREADS, literal("fp16_amp", "SUM_THREADS")),
        "attention.FLASH_ROWS, FLASH_KEYS, BWD_TILE, PAIR_TILE, ROW_WARPS": (
            (attention.FLASH_ROWS, attention.FLASH_KEYS, attention.BWD_TILE, attention.PAIR_TILE, attention.ROW_WARPS),
            tuple(literal("attention", m) for m in ("FLASH_ROWS", "FLASH_KEYS", "BWD_TILE", "PAIR_TILE", "ROW_WARPS"))),
        "attention.MMA_WARPS, MMA_ROWS, MMA_KEYS, MAX_HEAD_DIM": (
            (attention.MMA_WARPS, attention.MMA_ROWS, attention.MMA_KEYS, attention.MAX_HEAD_DIM),
            tuple(literal("attention", m) for m in ("MMA_WARPS", "MMA_ROWS", "MMA_KEYS", "MAX_HEAD_DIM"))),
        "amp.FOUND_INF, SKIP, GOOD_STEPS, STEPS, SKIPPED": (
            (amp.FOUND_INF, amp.SKIP, amp.GOOD_STEPS, amp.STEPS, amp.SKIPPED),
            tuple(literal("fp16_amp", m) for m in ("FOUND_INF", "SKIP", "GOOD_STEPS", "STEPS", "SKIPPED"))),
    }


def test_every_constant_python_takes_from_a_kernel_matches_its_source():
    constants = kernel_constants()
    wrong = {where: pair for where, pair in constants.items() if pair[0] != pair[1]}
    assert wrong == {}, wrong
    # the values the launchers used when they were written out by hand: reading them changed no launch
    from gpuedu.ops import fp16
    assert fp16.WMMA_PIPELINED == {2: ((128, 128), 61440, 256), 3: ((128, 256), 92160, 256)}
    assert fp16.MMA_GEMMS[9] == ((128, 128), 256, 65536) and fp16.MMA_GEMMS[10] == ((128, 256), 256, 98304)
    assert constants["gemm.TILE7"][0] == dict(BM=128, BN=128, BK=16, THREADS=256)
    assert [t[1:] for t in constants["dense.GEMM_TILES"][0]] == [(128, 128, 256), (64, 64, 128), (32, 32, 64)]


def test_no_launcher_writes_a_kernel_tile_size_by_hand():
    # A module-level NAME = <number> in gpuedu/ops/ whose name is one of the kernels' #defines is a copy
    # that can drift from the source: read it with kernels.define instead.
    defined = set()
    for filename in os.listdir(kernels.DIR):
        if filename.endswith((".cu", ".cuh")):
            defined |= set(re.findall(r"^\s*#define (\w+)", kernels.source(filename), re.M))
    ops_dir = os.path.join(os.path.dirname(kernels.DIR), "ops")
    copies = []
    for filename in sorted(os.listdir(ops_dir)):
        if filename.endswith(".py"):
            with open(os.path.join(ops_dir, filename), encoding="utf-8") as f:
                for line in f:
                    m = re.match(r"([A-Z][A-Z0-9_]*(?:\s*,\s*[A-Z][A-Z0-9_]*)*)\s*=\s*[\d(]", line)
                    if m:
                        copies += [f"{filename}: {n.strip()}" for n in m.group(1).split(",")
                                   if n.strip() in defined and "define(" not in line]
    assert copies == [], copies
