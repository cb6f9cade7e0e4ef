"""The kernel loader: finding files, reading them, bad names, memoised compilation."""
import os

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
