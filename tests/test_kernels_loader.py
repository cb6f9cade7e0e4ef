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
    return found


def argument_order_problems(name, params):
    """What breaks common.cuh's parameter order in one kernel: a pointer after a size or scalar, or a
    written pointer after a read-only one."""
    problems, seen_scalar, seen_const = [], None, None
    for p in params:
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
    words = param.replace("unsigned", "").split()[:-1]   # the type, without the parameter's name
    return {"int": "i", "float": "f", "double": "d"}[" ".join(words)]


def test_every_prepared_signature_matches_its_kernel():
    # Every launcher that names a kernel with a literal signature, launch.kernel("file", "name", "PPi"),
    # gives the kernel's declared parameters in their order: a launch in another order fails here.
    declared = {}
    for name in kernels.names():
        declared[name] = {k: "".join(struct_letter(p) for p in params)
                          for k, params in kernel_parameter_lists(kernels.source(name)).items()}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    call = re.compile(r"\.kernel\(\s*\"(\w+)\",\s*(f?)(\"[^\"]+\"|\w+),\s*\"([A-Za-z]+)\"")
    checked, problems = 0, []
    for folder in ("gpuedu", "tests", "benchmarks"):
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            if os.sep + "emulator" in dirpath:
                continue
            for filename in files:
                if not filename.endswith(".py"):
                    continue
                with open(os.path.join(dirpath, filename), encoding="utf-8") as f:
                    text = f.read()
                for file, is_f, name, signature in call.findall(text):
                    if file not in declared:
                        continue
                    where = f"{filename}: {file}.cu {name}"
                    if name.startswith('"') and not is_f:   # a literal name: that kernel
                        ok = declared[file].get(name.strip('"')) == signature
                    else:           # an f-string or a variable: one of the kernels the name can be
                        pattern = re.sub(r"\\\{[^}]*\\\}", r"\\w+", re.escape(name.strip('"'))) if is_f else r"\w+"
                        ok = any(re.fullmatch(pattern, k) and s == signature for k, s in declared[file].items())
                    if not ok:
                        problems.append(f"{where}: launched as {signature!r}, declared {declared[file]}")
                    checked += 1
    assert checked >= 30, f"only {checked} launch signatures found: has the launchers' form changed?"
    assert problems == [], "\n".join(problems)
