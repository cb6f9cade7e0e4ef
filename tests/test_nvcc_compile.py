"""Everything the emulator accepts must be real CUDA: compile every kernel with nvcc.

- every ``.cu`` in ``gpuedu/kernels/`` (whoever added it), for sm_75 and sm_90, or for sm_80 and sm_90 where
  its instructions need sm_80 (``SM80_FILES``: such a file says so with an ``#error`` below sm_80), or for
  sm_90a alone where they are Hopper's architecture-specific ones (``SM90A_FILES``: wgmma, setmaxnreg);
  attention.cu's tensor-core kernels (sm_80 instructions) also for sm_80 at each head size they take, their
  PTX read for the instructions;
- every kernel source embedded in a lesson's code cells: a triple-quoted string that contains
  ``__global__``, wrapped in ``extern "C" { ... }`` unless it says ``extern "C"`` itself, as
  PyCUDA's ``SourceModule`` does. Such sources must be complete, literal CUDA (sizes through
  ``#define`` or compiler options, not f-string holes), or they cannot be checked here.

nvcc builds cubins without a GPU (about 0.3 s each); a small thread pool keeps the whole file
well under two minutes. Skipped where nvcc is not on PATH.
"""
import ast
import glob
import json
import os
import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor

import pytest

from gpuedu import kernels

pytestmark = pytest.mark.nvcc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LESSONS = os.path.join(ROOT, "lessons")
ARCHES = ("sm_75", "sm_90")
# kernel files written in instructions that begin with sm_80 (mma.sync.m16n8k16 with FP32 sums, cp.async)
SM80_FILES = {"mma_gemm"}
SM80_ARCHES = ("sm_80", "sm_90")
# kernel files built for sm_90a alone (wgmma, setmaxnreg: ptxas refuses them for any other target)
SM90A_FILES = {"wgmma_gemm"}
NVCC = shutil.which("nvcc")
WORKERS = 4

needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")


def _nvcc(path, arch):
    """Compile one file to a cubin; returns (ok, message)."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [NVCC, "-cubin", f"-arch={arch}", "-I", kernels.DIR, "-o", os.path.join(tmp, "k.cubin"), path]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    return proc.returncode == 0, proc.stderr.strip()


def _compile_all(jobs):
    """jobs: list of (label, path, arch). Returns the failures as readable strings."""
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        results = list(pool.map(lambda job: (job, _nvcc(job[1], job[2])), jobs))
    return [f"{label} [{arch}]:\n{msg}" for (label, _, arch), (ok, msg) in results if not ok]


def _strip_magics(code):
    """Drop IPython-only lines (%magic, !shell) so that the cell parses as Python."""
    kept = []
    for line in code.splitlines():
        stripped = line.lstrip()
        kept.append("" if stripped.startswith(("%", "!")) else line)
    return "\n".join(kept)


def lesson_kernel_sources(notebook_path):
    """(label, source) of every string literal containing __global__ in the notebook's code cells."""
    with open(notebook_path, encoding="utf-8") as f:
        nb = json.load(f)
    found = []
    for index, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        code = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        if "__global__" not in code:
            continue
        try:
            tree = ast.parse(_strip_magics(code))
        except SyntaxError as exc:
            raise AssertionError(f"{os.path.basename(notebook_path)} cell {index} does not parse: {exc}")
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr) and any(
                    isinstance(v, ast.Constant) and "__global__" in str(v.value) for v in node.values):
                raise AssertionError(
                    f"{os.path.basename(notebook_path)} cell {index}: a kernel source is an f-string; "
                    f"write it as literal CUDA with sizes via #define or options so that nvcc can check it")
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "__global__" in node.value:
                found.append((f"{os.path.basename(notebook_path)} cell {index} line {node.lineno}", node.value))
    return found


def _as_pycuda_would_compile(src):
    # SourceModule wraps the source in extern "C" unless told no_extern_c; sources that declare
    # extern "C" themselves are passed with no_extern_c=True.
    return src if 'extern "C"' in src else 'extern "C" {\n' + src + "\n}\n"


@needs_nvcc
def test_every_kernel_file_compiles():
    names = kernels.names()
    assert names, f"no .cu files found in {kernels.DIR}"
    assert SM80_FILES <= set(names), f"SM80_FILES names files that are not there: {SM80_FILES - set(names)}"
    assert SM90A_FILES <= set(names), f"SM90A_FILES names files that are not there: {SM90A_FILES - set(names)}"
    arches = {n: ("sm_90a",) if n in SM90A_FILES else SM80_ARCHES if n in SM80_FILES else ARCHES for n in names}
    jobs = [(f"{n}.cu", kernels.path(n), arch) for n in names for arch in arches[n]]
    failures = _compile_all(jobs)
    assert not failures, "nvcc rejected:\n\n" + "\n\n".join(failures)


@needs_nvcc
def test_the_tensor_core_attention_is_built_for_sm80_on_and_traps_before(tmp_path):
    # attention.cu's version 4 issues mma.sync m16n8k16, ldmatrix and cp.async (ptx_sm80.cuh): for sm_80 and
    # sm_90, at every head size the launcher takes, its PTX holds them; for sm_75 (ARCHES above builds the
    # file there, for versions 1-3) the wrappers compile to traps and no such instruction is left.
    from gpuedu.ops import attention
    wanted = ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
              "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
              "ldmatrix.sync.aligned.m8n8.x4.shared.b16", "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
              "cp.async.cg.shared.global", "cp.async.commit_group", "cp.async.wait_group")
    jobs = [(arch, d) for arch in ("sm_75", "sm_80", "sm_90") for d in attention.MMA_HEAD_DIMS]

    def ptx(job):
        arch, head_dim = job
        out = tmp_path / f"attention_{arch}_{head_dim}.ptx"
        cmd = [NVCC, "-ptx", f"-arch={arch}", f"-DHEAD_DIM={head_dim}", "-I", kernels.DIR, "-o", str(out),
               kernels.path("attention")]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        return job, proc.returncode, proc.stderr.strip(), out.read_text() if proc.returncode == 0 else ""
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        results = list(pool.map(ptx, jobs))
    problems = []
    for (arch, head_dim), rc, err, text in results:
        if rc:
            problems.append(f"{arch} HEAD_DIM={head_dim}: nvcc failed:\n{err}")
            continue
        entries = set(re.findall(r"\.entry (\w+)\(", text))
        if not {"attention_mma_forward", "attention_mma_forward_bf16"} <= entries:
            problems.append(f"{arch} HEAD_DIM={head_dim}: version 4's kernels missing, entries {sorted(entries)}")
        present = [w for w in wanted if w in text]
        if arch == "sm_75" and (present or "trap;" not in text):
            problems.append(f"{arch} HEAD_DIM={head_dim}: expected traps and none of {present}")
        if arch != "sm_75" and present != list(wanted):
            problems.append(f"{arch} HEAD_DIM={head_dim}: missing {sorted(set(wanted) - set(present))}")
    assert problems == [], "\n".join(problems)


@needs_nvcc
@pytest.mark.parametrize("name", sorted(SM80_FILES))
def test_an_sm80_file_says_what_to_use_on_an_older_gpu(name):
    ok, message = _nvcc(kernels.path(name), "sm_75")
    assert not ok and "needs sm_80 or later" in message and "wmma_gemm.cu" in message, message


def test_extraction_finds_kernels_and_wraps_them(tmp_path):
    # The extractor must see plain and raw triple-quoted sources, skip strings without a kernel,
    # and refuse f-string kernels; the wrapper must mirror SourceModule's extern "C".
    nb = {"cells": [
        {"cell_type": "markdown", "source": "a = '''__global__ void not_code() {}'''"},
        {"cell_type": "code", "source": ["%time x = 1\n", "src = r'''\n__global__ void k(float* a) { a[0] = 1; }\n'''\n",
                                         "other = '''no kernel here'''\n"]},
        {"cell_type": "code", "source": 'mod = SourceModule("""extern "C" __global__ void j() {}""", no_extern_c=True)'},
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb))
    found = lesson_kernel_sources(str(path))
    assert [label.split(" line")[0] for label, _ in found] == ["nb.ipynb cell 1", "nb.ipynb cell 2"]
    assert _as_pycuda_would_compile(found[0][1]).startswith('extern "C" {')
    assert _as_pycuda_would_compile(found[1][1]) == found[1][1]
    nb["cells"].append({"cell_type": "code", "source": 'n = 4\nsrc = f"""__global__ void k() {{ int a[{n}]; }}"""'})
    path.write_text(json.dumps(nb))
    with pytest.raises(AssertionError, match="f-string"):
        lesson_kernel_sources(str(path))


# Instructions that begin with sm_80 (cp.async, mma.sync m16n8k16, BF16): a lesson kernel that issues one is built
# for sm_80 and sm_90 (its cell runs it on the emulator, sm_80, or on a GPU of compute capability 8.0 or later).
_SM80_PTX = re.compile(r"cp\.async|mma\.sync\.aligned\.m16n8k16|\.bf16")
# Hopper's (wgmma, setmaxnreg, TMA's tensor copies and maps, the mbarriers' transaction counts, the course's wrappers
# of them, thread-block clusters): built for the architecture-specific target sm_90a alone, as the lesson's cells
# build them.
_SM90A_PTX = re.compile(r"wgmma\.|setmaxnreg|cp\.async\.bulk|CUtensorMap|expect_tx|ptx_sm90\.cuh|__cluster_dims__|"
                        r"this_cluster|shared::cluster")


def _lesson_arches(src):
    if _SM90A_PTX.search(src):
        return ("sm_90a",)
    return ("sm_80", "sm_90") if _SM80_PTX.search(src) else ARCHES


def test_a_lesson_kernel_with_ampere_instructions_is_built_for_ampere_and_hopper():
    assert _lesson_arches('asm volatile("cp.async.commit_group;");') == ("sm_80", "sm_90")
    assert _lesson_arches("__global__ void k(float* x) { x[0] = 1.0f; }") == ARCHES
    assert _lesson_arches('#include "ptx_sm90.cuh"\n__global__ void k() {}') == ("sm_90a",)
    assert _lesson_arches('asm volatile("wgmma.fence.sync.aligned;");') == ("sm_90a",)
    assert _lesson_arches("__global__ void __cluster_dims__(2, 1, 1) k() {}") == ("sm_90a",)


@needs_nvcc
def test_every_lesson_kernel_compiles(tmp_path):
    notebooks = sorted(glob.glob(os.path.join(LESSONS, "*.ipynb")))
    if not notebooks:
        pytest.skip("no lessons yet")
    jobs = []
    for nb in notebooks:
        for i, (label, src) in enumerate(lesson_kernel_sources(nb)):
            path = tmp_path / f"{os.path.basename(nb)[:-6]}_{i}.cu"
            path.write_text(_as_pycuda_would_compile(src))
            jobs += [(label, str(path), arch) for arch in _lesson_arches(src)]
    if not jobs:
        pytest.skip("no lesson contains an inline kernel")
    failures = _compile_all(jobs)
    assert not failures, "nvcc rejected lesson kernels:\n\n" + "\n\n".join(failures)


@needs_nvcc
@pytest.mark.parametrize("name", sorted(SM90A_FILES))
def test_an_sm90a_file_is_refused_by_ptxas_for_plain_sm90(name):
    # the Hopper GEMMs' wgmma and setmaxnreg exist for the architecture-specific target only: the launcher builds
    # them with arch="sm_90a", and a build for sm_90 fails in ptxas, naming the instruction
    ok, message = _nvcc(kernels.path(name), "sm_90")
    assert not ok and "not supported on .target 'sm_90'" in message, message
