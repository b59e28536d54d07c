#!/usr/bin/env bash
# The Python package tests, run by ctest (tests/python/CMakeLists.txt):
#   run.sh api|quick|leaks  pytest on the package from the source tree (PYTHONPATH=python) with the CTest
#                      build's library and program (SPECDEC_LIBRARY, SPECDEC_BIN from ctest);
#                      quick: the tests marked quick (the ASan build's python_api)
#   run.sh install DIR `pip install .` (CPU only) into a fresh virtual environment made with Debian's
#                      /usr/bin/python3 when present, then, from an empty directory and with nothing
#                      of the source tree on the path: the README example, the `specdec` command and
#                      `python -m specdec.serve --help`; then `pip wheel . --no-deps` installed into a
#                      second fresh environment, where the package is imported from it and the README
#                      example and the command run again. Both builds run without pip's build
#                      isolation, in the first environment holding exactly pyproject.toml's
#                      build-system requires (what an isolated build installs): scikit-build-core
#                      clears the CMake cache (CMakeFiles, hence every object) whenever the build runs
#                      from another isolated environment, which pip makes anew for every build, so
#                      isolated builds recompile everything (~40 s here) while these share one CMake
#                      tree ($DIR/build: the wheel only packages, and a later run of the test is
#                      incremental)
#   run.sh cuda-mode DIR  the package's CUDA choice (pyproject.toml's SPECDEC_CUDA default) does what
#                      the README says, "CPU always and CUDA when the toolkit is present": a configure
#                      (no build) with nvcc out of reach gives the CPU backend without an error, and
#                      one with nvcc found gives the CUDA backend even where no GPU is visible
# The interpreter: the test venv <repo>/build/venv of tools/deps.sh when it exists, else python3 when
# it has the test packages, else that venv is created here from tests/requirements.txt.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
mode=$1

test_python() {
  local venv=$root/build/venv
  if [ -x "$venv/bin/python" ]; then echo "$venv/bin/python"; return; fi
  if python3 -c "import pytest, cffi, tqdm" 2>/dev/null; then command -v python3; return; fi
  mkdir -p "$root/build"
  (
    flock 9
    if [ ! -x "$venv/bin/python" ]; then
      python3 -m venv "$venv" >&2
      "$venv/bin/pip" install -q --disable-pip-version-check -r "$root/tests/requirements.txt" >&2
    fi
  ) 9>"$root/build/.venv.lock"
  echo "$venv/bin/python"
}

case $mode in
  api|quick|leaks)
    py=$(test_python)
    case $mode in
      api) sel=(--ignore="$root/tests/python/test_leaks.py" "$root/tests/python") ;;
      quick) sel=(-m quick --ignore="$root/tests/python/test_leaks.py" "$root/tests/python") ;;
      leaks) sel=("$root/tests/python/test_leaks.py") ;;
    esac
    export PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}"
    exec "$py" -m pytest -q -p no:cacheprovider --rootdir="$root/tests/python" "${sel[@]}"
    ;;
  install)
    work=$2
    base=python3
    if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import venv, ensurepip" 2>/dev/null; then base=/usr/bin/python3; fi
    # fresh environments; the CMake tree in $work/build is reused (by the wheel too)
    rm -rf "$work/venv" "$work/venv-wheel" "$work/wheel" "$work/empty"
    mkdir -p "$work/empty"
    installed() {  # VENV: the package, its library, program, header and models all come from VENV
      cd "$work/empty"
      (
        unset PYTHONPATH SPECDEC_LIBRARY SPECDEC_BIN SPECDEC_HEADER SPECDEC_MODELS_DIR
        py=$1/bin/python
        "$py" -c "
import os, specdec, specdec._paths as p
pkg = os.path.dirname(specdec.__file__)
assert pkg.startswith('$1/'), pkg
for f in (p.library_path(), p.header_path(), p.binary_path(), p.models_dir()):
    assert f and f.startswith(pkg), (f, pkg)
print('installed', specdec.__version__, 'library', specdec.library_version(), 'in', pkg)"
        "$py" "$root/tests/python/readme_example.py" "$root/README.md"
        "$1/bin/specdec" generate -p "And God said" -n 8 --temp 0 --backend cpu
        "$py" -m specdec.serve --help >/dev/null
      )
    }
    t0=$(date +%s)
    "$base" -m venv "$work/venv"
    mapfile -t requires < <("$base" -c "
import tomllib
print('\n'.join(tomllib.load(open('$root/pyproject.toml', 'rb'))['build-system']['requires']))")
    "$work/venv/bin/pip" install -q --disable-pip-version-check "${requires[@]}"
    SPECDEC_CUDA=OFF SKBUILD_BUILD_DIR="$work/build" "$work/venv/bin/pip" install -q --disable-pip-version-check \
        --no-build-isolation "$root"
    echo "python_install: $base -m venv + ${requires[*]} + pip install . in $(( $(date +%s) - t0 )) s"
    installed "$work/venv"
    t0=$(date +%s)
    SPECDEC_CUDA=OFF SKBUILD_BUILD_DIR="$work/build" "$work/venv/bin/pip" wheel -q --disable-pip-version-check \
        --no-build-isolation --no-deps -w "$work/wheel" "$root"
    wheels=("$work"/wheel/specdec-*.whl)
    [ ${#wheels[@]} = 1 ] && [ -f "${wheels[0]}" ] || { echo "python_install: pip wheel made ${wheels[*]}"; exit 1; }
    t1=$(date +%s)
    "$base" -m venv "$work/venv-wheel"
    "$work/venv-wheel/bin/pip" install -q --disable-pip-version-check "${wheels[0]}"
    echo "python_install: pip wheel . in $(( t1 - t0 )) s ($(basename "${wheels[0]}")), a fresh venv + pip" \
         "install of the wheel in $(( $(date +%s) - t1 )) s"
    installed "$work/venv-wheel"
    echo "python_install: OK"
    ;;
  cuda-mode)
    work=$2
    mode=$(python3 -c "
import tomllib
d = tomllib.load(open('$root/pyproject.toml', 'rb'))['tool']['scikit-build']['cmake']['define']['SPECDEC_CUDA']
print(d['default'] if isinstance(d, dict) else d)")
    echo "python_cuda_mode: pyproject.toml builds with SPECDEC_CUDA=$mode"
    configure() {  # configure only, into a fresh tree; prints the CUDA status line
      rm -rf "$work/cfg" && mkdir -p "$work"
      cmake -S "$root" -B "$work/cfg" -DSPECDEC_CUDA="$mode" -DSPECDEC_PYTHON_PACKAGE=ON \
            -DSPECDEC_BUILD_TESTS=OFF -DSPECDEC_BUILD_BENCH=OFF > "$work/cfg.log" 2>&1 \
        || { tail -5 "$work/cfg.log"; echo "python_cuda_mode: configure failed"; return 1; }
      grep -o "specdec: CUDA backend [A-Z]*" "$work/cfg.log"
    }
    fail=0
    if PATH=/usr/bin:/bin command -v nvcc >/dev/null; then
      echo "python_cuda_mode: nvcc in /usr/bin: no PATH without it to try"
    else
      got=$(unset CUDACXX CUDA_PATH; PATH=/usr/bin:/bin configure) || fail=1
      [ "$got" = "specdec: CUDA backend OFF" ] || { echo "FAIL without nvcc: '$got' (want the CPU backend)"; fail=1; }
    fi
    nvcc=$(command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; } || true)
    if [ -n "$nvcc" ]; then
      got=$(PATH=$(dirname "$nvcc"):$PATH configure) || fail=1
      [ "$got" = "specdec: CUDA backend ON" ] || { echo "FAIL with $nvcc: '$got' (want the CUDA backend)"; fail=1; }
    else
      echo "python_cuda_mode: no nvcc on this machine: the toolkit case is not checked here"
    fi
    rm -rf "$work/cfg"
    [ $fail = 0 ] && echo "python_cuda_mode: OK"
    exit $fail
    ;;
  *) echo "usage: $0 api|quick|leaks|install DIR|cuda-mode DIR" >&2; exit 2 ;;
esac
