"""The learners' container image (Containerfile, .dockerignore, .devcontainer/devcontainer.json) and
scripts/container.py (`make container`), without buildah: CI builds the image and runs lesson 01 in it."""
import configparser
import fnmatch
import json
import os
import re
import shlex
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def instructions():
    """The Containerfile's instructions, (KEYWORD, arguments), continuation lines joined, comments dropped."""
    with open(os.path.join(REPO, "Containerfile")) as f:
        lines = [line.rstrip("\n") for line in f if not line.lstrip().startswith("#")]
    text = re.sub(r"\\\n", "", "\n".join(lines))
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in text.splitlines() if line.strip()]


def one(keyword):
    (args,) = [a for k, a in instructions() if k == keyword]
    return args


def ignore_patterns(name=".dockerignore"):
    with open(os.path.join(REPO, name)) as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


def ignored(path, patterns):
    """Whether one of the patterns (Docker's syntax: from the context's root, **/ for any folder) leaves out
    ``path`` or a folder above it."""
    parts = path.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    for pattern in (p.strip("/") for p in patterns):          # Docker cleans a pattern's slashes off
        anywhere = pattern.startswith("**/")
        bare = pattern[3:] if anywhere else pattern
        for prefix in prefixes:
            if fnmatch.fnmatchcase(prefix, bare) or (anywhere and fnmatch.fnmatchcase(prefix.rsplit("/", 1)[-1], bare)):
                return True
    return False


def devcontainer():
    with open(os.path.join(REPO, ".devcontainer", "devcontainer.json")) as f:
        return json.load(f)


def test_the_image_starts_from_the_base_the_script_imports(container):
    assert one("FROM") == container.BASE == "docker.io/library/debian:12"


def test_both_base_roots_are_debian_12_and_the_native_one_is_this_machines(container):
    toolchains = container.toolchains
    native = toolchains.CHROOTS[container.base_chroot(container.NATIVE)]
    assert native["suite"] == "bookworm" and "arch" not in native          # debootstrap's default: this machine's
    assert toolchains.CHROOTS[container.base_chroot("arm64")]["suite"] == "bookworm"
    assert container.base_image("arm64") != container.base_image("amd64")     # each kept under its own name
    if container.NATIVE == "amd64":
        assert container.base_chroot("arm64") == "arm64"
        assert toolchains._foreign_arch(toolchains.CHROOTS["arm64"]) == "arm64"   # registers qemu-user first


def test_the_ignore_file_is_one_and_leaves_out_what_the_host_built():
    # one file for Docker, buildah and Podman: a .containerignore would take precedence over it for the last two
    assert not os.path.exists(os.path.join(REPO, ".containerignore"))
    patterns = ignore_patterns()
    for path in (".git", ".git/HEAD", ".venv/bin/python", "build/container/build-amd64.log", "dist/gpuedu.tar.gz",
                 "course-report/report.md", "gpu-check-logs/x.log", "gpuedu/__pycache__/backend.cpython-311.pyc",
                 "gpuedu.egg-info/PKG-INFO", "lessons/.ipynb_checkpoints/01-checkpoint.ipynb", ".whl/x.whl",
                 "wheelhouse/x.whl"):
        assert ignored(path, patterns), path
    # and all that .gitignore leaves out
    with open(os.path.join(REPO, ".gitignore")) as f:
        for entry in (line.strip() for line in f if line.strip() and not line.startswith("#")):
            name = entry.strip("/")
            example = name.replace("*", "x")
            assert ignored(example, patterns) and (entry.startswith("/") or ignored(f"a/{example}", patterns)), entry


def test_what_nbval_and_the_editable_install_need_goes_into_the_image():
    # conftest.py, pyproject.toml and the sanitizers give the image's nbval the settings `make test` has
    patterns = ignore_patterns()
    for path in ("conftest.py", "pyproject.toml", "setup.py", "tests/nbval_sanitize.cfg",
                 "lessons/01_first_kernel.ipynb", "gpuedu/__init__.py", "gpuedu/emulator/_native/cassert",
                 "README.md", "LICENSE", "Makefile"):
        assert not ignored(path, patterns), path


def test_the_dependencies_layer_depends_on_pyproject_toml_alone():
    steps = instructions()
    copies = [(i, args) for i, (k, args) in enumerate(steps) if k == "COPY"]
    everything = [i for i, args in copies if args.split()[-2:] == [".", "."]]
    assert len(everything) == 1, copies
    sources = [source for i, args in copies if i < everything[0]
               for source in [a for a in args.split() if not a.startswith("--")][:-1]]
    assert sources and set(sources) <= {"pyproject.toml", "setup.py"}, sources
    install = [i for i, (k, args) in enumerate(steps) if k == "RUN" and "pip install" in args and "-r " in args]
    assert len(install) == 1 and install[0] < everything[0]
    # after the sources, nothing is downloaded: gpuedu alone, with the build backend already there
    (last,) = [args for i, (k, args) in enumerate(steps) if k == "RUN" and i > everything[0]]
    assert "--no-deps" in last and "--no-build-isolation" in last and "-e ." in last


def test_the_image_has_the_extras_the_lessons_need_and_not_the_sites():
    with open(os.path.join(REPO, "Containerfile")) as f:
        text = f.read()
    named = set(re.findall(r"extra\['(\w+)'\]", text))
    assert named == {"test", "mpi", "lab"}       # nbval; mpi4py and MPICH for lesson 12; JupyterLab
    from tomllib import load
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        assert named <= set(load(f)["project"]["optional-dependencies"])
    for package in ("g++", "make", "python3-venv"):
        assert re.search(rf"apt-get install [^&]*(?<![\w+.-]){re.escape(package)}(?![\w+.-])", text), package
    assert "--no-install-recommends" in text and "rm -rf /var/lib/apt/lists/*" in text


def test_it_runs_as_the_learner_with_a_kernel_cache_the_lessons_outputs_hide():
    user = one("USER")
    runs = "\n".join(a for k, a in instructions() if k == "RUN")
    assert user != "root" and re.search(rf"useradd [^&]*--uid 1000 [^&]*\b{user}\b", runs)
    cache = re.search(r"GPUEDU_CACHE_DIR=(\S+)", one("ENV")).group(1)
    assert cache.startswith(f"/home/{user}/")
    # a lesson that prints the cache's path still compares under nbval
    sanitize = configparser.ConfigParser(interpolation=None)
    sanitize.read(os.path.join(REPO, "tests", "nbval_sanitize.cfg"))
    assert re.fullmatch(sanitize["kernel-cache-paths"]["regex"], cache)
    assert one("WORKDIR") == f"/home/{user}/gpuedu"


def test_jupyterlab_listens_on_the_exposed_port_and_devcontainer_forwards_it():
    command = json.loads(one("CMD"))
    assert command[:2] == ["jupyter", "lab"] and "--ip=0.0.0.0" in command and "lessons/" in command
    assert not any("token" in a.lower() for a in command), "Jupyter's own token stays on"
    (port,) = [int(a.split("=")[1]) for a in command if a.startswith("--port=")]
    assert one("EXPOSE") == str(port)
    assert devcontainer()["forwardPorts"] == [port]


def test_the_devcontainer_builds_the_containerfile_as_its_user():
    config = devcontainer()
    folder = os.path.join(REPO, ".devcontainer")
    assert os.path.normpath(os.path.join(folder, config["build"]["dockerfile"])) == os.path.join(REPO, "Containerfile")
    assert os.path.normpath(os.path.join(folder, config["build"]["context"])) == REPO
    assert config["remoteUser"] == one("USER")
    assert {"ms-python.python", "ms-toolsai.jupyter"} <= set(config["customizations"]["vscode"]["extensions"])
    interpreter = config["customizations"]["vscode"]["settings"]["python.defaultInterpreterPath"]
    assert interpreter.startswith(re.search(r"PATH=([^:]+)/bin:", one("ENV")).group(1) + "/")


def test_the_build_command_and_the_containerfile_name_the_same_secret(container):
    command = container.bud_command(container.NATIVE, ca="/etc/ssl/certs/ca-certificates.crt")
    for flag in ("--isolation=chroot", "--pull=never", "--layers"):
        assert flag in command
    assert command[command.index("-t") + 1] == "gpuedu:ci" and command[command.index("-f") + 1] == "Containerfile"
    assert command[-1] == "." and "--arch" not in command and "--no-cache" not in command
    secret = command[command.index("--secret") + 1]
    assert secret == "id=pip-ca,src=/etc/ssl/certs/ca-certificates.crt"
    run = [a for k, a in instructions() if k == "RUN" and "pip install -q --no-cache-dir -r" in a][0]
    assert re.search(r"--mount=type=secret,id=pip-ca\b", run) and "/run/secrets/pip-ca" in run
    # without one (Docker or Podman elsewhere) the build goes on with the image's own CA bundle
    assert "--secret" not in container.bud_command(container.NATIVE)
    foreign = "arm64" if container.NATIVE != "arm64" else "amd64"
    other = container.bud_command(foreign, no_cache=True)
    assert other[other.index("--arch") + 1] == foreign and other[other.index("-t") + 1] == f"gpuedu:ci-{foreign}"
    assert "--no-cache" in other


def test_the_lesson_runs_with_make_tests_nbval_flags(container):
    recipe = subprocess.run(["make", "-n", "-o", ".venv/.installed", "test"], cwd=REPO, capture_output=True,
                            text=True, timeout=60).stdout
    assert recipe, "make -n test printed nothing"
    made = shlex.split(recipe.replace("\\\n", " ").split(";")[0])      # pytest's command, before the exit check
    for flag in ("--nbval", "--nbval-cell-timeout=900", "no:cacheprovider", "--timeout=600", "--timeout-method=thread"):
        assert flag in made and flag in container.NBVAL, flag
    assert os.path.isfile(os.path.join(REPO, container.LESSON))
    assert container.NBVAL[:3] == ["python", "-m", "pytest"]         # the image's venv is first on its PATH


def test_doctors_verdict_is_its_result_line(container, tmp_path):
    log = tmp_path / "doctor.log"
    log.write_text("$ buildah run c -- python -m gpuedu doctor\ngpuedu doctor\n  [ok ] Python: 3.11.2\n\n"
                   "Result: ready, the lessons will run.\n$ buildah rm c\n5f0c2e\n")
    assert container.doctor_result(str(log)) == "Result: ready, the lessons will run."
    log.write_text("$ buildah from --pull=never gpuedu:ci\nError: gpuedu:ci: image not known\n")
    assert container.doctor_result(str(log)) == "Error: gpuedu:ci: image not known"


def test_an_unknown_arch_is_refused_with_the_ones_it_builds():
    done = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "container.py"), "--arch", "riscv64"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "argument --arch: invalid choice: 'riscv64' (choose from 'amd64', 'arm64')" in done.stderr


def test_make_container_runs_the_script():
    recipe = subprocess.run(["make", "-n", "container", "CONTAINER_ARGS=--arch arm64"], cwd=REPO,
                            capture_output=True, text=True, timeout=60).stdout
    assert "scripts/container.py --arch arm64" in recipe, recipe
    assert ".venv" not in recipe          # the image makes its own environment


def test_a_root_for_an_arch_it_has_none_for_is_a_setup_error(container):
    with pytest.raises(container.SetupError, match="no Debian 12 root for riscv64"):
        container.base_chroot("riscv64")


def test_the_base_leaves_out_what_debootstrap_and_the_toolchain_legs_left_in_the_root(container, tmp_path):
    # the arm64 root is shared with scripts/toolchains.py, whose legs put the checkout and a venv into /opt
    root = tmp_path / "root"
    kept = ["etc/os-release", "root/.bashrc", "usr/bin/sh", "var/lib/dpkg/status", "var/cache/apt/archives/lock"]
    dropped = ["opt/gpuedu/setup.py", "opt/venv/bin/python", "etc/gpuedu-pip-ca.crt", "root/.cache/pip/x",
               "var/cache/apt/archives/g++_12.2.0_amd64.deb", "var/lib/apt/lists/bookworm_InRelease",
               "etc/resolv.conf", "etc/hostname", ".gpuedu-ready", "proc/1", "dev/null", "tmp/x"]
    for name in kept + dropped:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    listing = subprocess.run(["tar", "-C", str(root), *[f"--exclude={x}" for x in container.LEFT_OUT], "-c", "."],
                             capture_output=True, check=True)
    names = subprocess.run(["tar", "-t"], input=listing.stdout, capture_output=True, check=True).stdout.decode()
    names = {n[2:].rstrip("/") for n in names.split()}
    assert set(kept) <= names and not names & set(dropped), names & set(dropped)
    assert {"opt", "tmp"} <= names                 # the folders stay, empty
