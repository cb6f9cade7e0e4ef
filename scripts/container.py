"""The course's container image (Containerfile, for learners on macOS and Windows) built and checked on this
machine with no image registry: lesson 01 under nbval and `gpuedu doctor` run inside the image it builds.
`make container` runs it. README.md, "Platforms", has the commands a learner builds and runs the image with.

    python scripts/container.py [--arch arm64] [--no-cache]

Steps:
  base    Debian 12 as debootstrap makes it (scripts/toolchains.py's chroot "debian12", kept in
          $GPUEDU_CHROOT_CACHE, default /var/cache/gpuedu-ci) is imported into buildah's storage as the image the
          Containerfile starts FROM, docker.io/library/debian:12; again only when that root is newer than the
          image made from it
  build   buildah bud --isolation=chroot --pull=never --layers -t gpuedu:ci -f Containerfile . (chroot isolation:
          the default one needs cgroups this VM lacks); the CA bundle this machine's pip trusts goes in as the
          build secret pip-ca (a proxy that re-signs TLS is not in Debian's bundle). Layers are kept between runs:
          a change to the sources rebuilds the last steps only; --no-cache builds every layer afresh (new
          releases of the dependencies come in only so, or with a change to pyproject.toml)
  nbval   lesson 01 under nbval in the image, as its user (buildah run), with the flags of `make test`
  doctor  python -m gpuedu doctor in the image
--arch arm64  the image for arm64 (an Apple-silicon Mac's), from toolchains.py's arm64 chroot, as gpuedu:ci-arm64;
          its programs run through qemu-user here, the build and the lesson some 5-10x slower

buildah (installed with apt-get when missing), debootstrap, tar and buildah's storage need root: as another user
each runs through `sudo -n`. Each step's output is kept in build/container/<step>-<arch>.log; a table of the steps
ends the run. Exit status: 0 every step passed, 1 a step failed, 2 a step could not be set up (no root, no
network).
"""
import argparse
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOGS = os.path.join(ROOT, "build", "container")


def _load_toolchains():
    """scripts/toolchains.py, whose chroots and helpers this script shares (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location("gpuedu_scripts_toolchains",
                                                  os.path.join(ROOT, "scripts", "toolchains.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


toolchains = _load_toolchains()
SetupError = toolchains.SetupError
_as_root, _run, _summary = toolchains._as_root, toolchains._run, toolchains._summary

CONTAINERFILE = "Containerfile"
# The name the Containerfile starts FROM: the registry's Debian 12, which this script stands in for.
BASE = "docker.io/library/debian:12"
ARCHES = ("amd64", "arm64")
NATIVE = {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)
# What the image runs: lesson 01 under nbval with `make test`'s flags (the repository's conftest.py and
# pyproject.toml, in the image's working folder, bring nbval's sanitizers and pytest's settings).
LESSON = "lessons/01_first_kernel.ipynb"
NBVAL = ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--timeout=600", "--timeout-method=thread",
         LESSON, "--nbval", "--nbval-cell-timeout=900"]
DOCTOR = ["python", "-m", "gpuedu", "doctor"]
STEPS = ("base", "build", "nbval", "doctor")


def image_tag(arch):
    return "gpuedu:ci" if arch == NATIVE else f"gpuedu:ci-{arch}"


def base_chroot(arch):
    """toolchains.py's chroot that the image for ``arch`` starts from."""
    if arch == NATIVE:
        return "debian12"
    if arch == "arm64":
        return "arm64"
    raise SetupError(f"no Debian 12 root for {arch} on this {NATIVE} machine: build that image on an {arch} one")


def base_image(arch):
    """Where the imported root is kept under its own name: BASE is pointed at the one a build needs."""
    return f"localhost/gpuedu-base:debian12-{arch}"


def bud_command(arch, ca=None, no_cache=False):
    command = ["buildah", "bud", "--isolation=chroot", "--pull=never", "--layers", "-t", image_tag(arch),
               "-f", CONTAINERFILE]
    if arch != NATIVE:
        command += ["--arch", arch]
    if ca:
        command += ["--secret", f"id=pip-ca,src={ca}"]
    if no_cache:
        command.append("--no-cache")
    return command + ["."]


def _output(command, log):
    """Run ``command`` (as root), its stderr appended to ``log``; its stdout, stripped, or SetupError."""
    with open(log, "a") as out:
        out.write("$ " + " ".join(shlex.quote(c) for c in command) + "\n")
        out.flush()
        done = subprocess.run(_as_root(command), stdout=subprocess.PIPE, stderr=out, stdin=subprocess.DEVNULL,
                              text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SetupError(f"{command[0]} {command[1]} failed (see {log})")
    return done.stdout.strip()


def _image_created(name, log):
    """When the image ``name`` was made (seconds since the epoch), or None when buildah has none."""
    try:
        return int(_output(["buildah", "inspect", "--type", "image", "--format", "{{.OCIv1.Created.Unix}}", name],
                           log))
    except SetupError:
        return None


# ---- the steps -----------------------------------------------------------------------------------------

def step_base(arch, log):
    """The chroot (made when missing), imported as base_image(arch) when that is missing or older than the
    root, then tagged BASE."""
    if shutil.which("buildah") is None:
        toolchains._apt_install("buildah", log)
    with toolchains.chroot_made(base_chroot(arch), log) as target:
        made = os.stat(os.path.join(target, ".gpuedu-ready")).st_mtime
        created = _image_created(base_image(arch), log)
        if created is None or created < made:
            _import_root(target, arch, log)
        else:
            with open(log, "a") as out:
                out.write(f"{base_image(arch)} is newer than {target}: kept\n")
    _output(["buildah", "tag", base_image(arch), BASE], log)
    return 0, f"{BASE} from {target}"


# Left out of the image: what debootstrap kept for its own use (the downloaded packages, apt's lists) or took from
# this machine (its name, its DNS), and what toolchains.py's legs put into a chroot they share with this script
# (the checkout in /opt/gpuedu, its /opt/venv, pip's cache; the arm64 root is one).
LEFT_OUT = ["./proc", "./dev", "./sys", "./.gpuedu-ready", "./etc/hostname", "./etc/resolv.conf",
            "./var/cache/apt/archives/*.deb", "./var/lib/apt/lists/*", "./opt/*", "./tmp/*", "./var/tmp/*",
            "./root/.cache", "./etc/gpuedu-pip-ca.crt"]


def _import_root(target, arch, log):
    """The root's files in a new image, as the registry's debian:12 has them (less LEFT_OUT)."""
    container = _output(["buildah", "from", "scratch"], log)
    try:
        mount = _output(["buildah", "mount", container], log)
        pack = subprocess.Popen(_as_root(["tar", "-C", target, *[f"--exclude={x}" for x in LEFT_OUT], "-c", "."]),
                                stdout=subprocess.PIPE)
        unpack = subprocess.run(_as_root(["tar", "-x", "-C", mount]), stdin=pack.stdout)
        pack.stdout.close()
        if pack.wait() != 0 or unpack.returncode != 0:
            raise SetupError(f"could not copy {target} into a new image")
        for folder in ("proc", "dev", "sys"):
            _output(["install", "-d", os.path.join(mount, folder)], log)
        _output(["buildah", "umount", container], log)
        _output(["buildah", "config", "--arch", arch, "--os", "linux", "--cmd", "bash",
                 "--env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", container], log)
        _output(["buildah", "commit", "-q", container, base_image(arch)], log)
    finally:
        _run(_as_root(["buildah", "rm", container]), log)


def step_build(arch, log, no_cache=False):
    if _run(_as_root(bud_command(arch, toolchains.pip_ca_bundle(), no_cache)), log) != 0:
        return 1, _summary(log)
    return 0, f"{image_tag(arch)}, {_output(['buildah', 'images', '--format', '{{.Size}}', image_tag(arch)], log)}"


def _in_image(arch, command, log):
    """``command`` in a container of the image, as its user in its working folder; the container goes after."""
    container = _output(["buildah", "from", "--pull=never", image_tag(arch)], log)
    try:
        return _run(_as_root(["buildah", "run", "--isolation=chroot", container, "--", *command]), log)
    finally:
        _run(_as_root(["buildah", "rm", container]), log)


def step_nbval(arch, log):
    return _in_image(arch, NBVAL, log), _summary(log)


def doctor_result(log):
    """doctor's verdict ("Result: ready, ..."), or what ended its run."""
    with open(log, errors="replace") as f:
        results = [line.strip() for line in f if line.startswith("Result:")]
    return results[-1] if results else _summary(log)


def step_doctor(arch, log):
    return _in_image(arch, DOCTOR, log), doctor_result(log)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", choices=ARCHES, default=NATIVE,
                        help=f"the image's architecture (default: this machine's, {NATIVE})")
    parser.add_argument("--no-cache", action="store_true", help="build every layer afresh")
    args = parser.parse_args(argv)
    os.makedirs(LOGS, exist_ok=True)
    rows, status = [], 0
    for step in STEPS:
        log = os.path.join(LOGS, f"{step}-{args.arch}.log")
        if step == "build":
            work = lambda: step_build(args.arch, log, args.no_cache)      # noqa: E731 (run at once, in the loop)
        else:
            work = lambda: globals()[f"step_{step}"](args.arch, log)     # noqa: E731
        row, step_status = toolchains.run_step(f"container ({args.arch})", step, log, work)
        rows.append(row)
        status = max(status, step_status)
        if step_status and step in ("base", "build"):
            break                       # no image to run in; doctor still runs after a failed lesson
    toolchains.print_table(rows, "step", "detail")
    return status


if __name__ == "__main__":
    sys.exit(main())
