#!/usr/bin/env bash
# Create the course's virtual environment (.venv) and install one role's tools into it.
#   EXTRAS=course bash tools/setup-venv.sh              # a learner: the course and JupyterLab
#   EXTRAS=course,test,grade bash tools/setup-venv.sh   # make test: adds the test and grading tools
#   PYTHON=python3.12 bash tools/setup-venv.sh          # pick the interpreter (3.10 or newer)
#   TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu bash tools/setup-venv.sh
#                                                       # CPU-only torch: a far smaller download
#   TORCH_WHEEL=/path/to/torch-2.13.0+cpu-...whl bash tools/setup-venv.sh
#                                                       # a torch wheel downloaded elsewhere
# torch is installed once, by whichever command creates .venv first; the CPU hint only counts then.
# The index is first asked once, with a short timeout (TORCH_INDEX_TIMEOUT, 10 s): one that
# cannot be reached stops the script in one line with the commands that work instead.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
EXTRAS=${EXTRAS:-course}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}
TORCH_INDEX_TIMEOUT=${TORCH_INDEX_TIMEOUT:-10}

# whether pip can reach the index: one request for torch's page, no retries; says why not
reachable() {
  "$PYTHON" - "$1" "$TORCH_INDEX_TIMEOUT" <<'PY'
import sys, urllib.request
url, timeout = sys.argv[1].rstrip("/") + "/torch/", float(sys.argv[2])
try:
    urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout).close()
except Exception as error:  # refused, timed out, no route, no name, an HTTP error
    print(getattr(error, "reason", None) or error)
    sys.exit(1)
PY
}

if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
  echo "tmm-course needs Python 3.10 or newer; '$PYTHON' is $("$PYTHON" --version 2>&1)." >&2
  echo "Fix: install a newer Python and run: PYTHON=python3.12 make course" >&2
  exit 1
fi
if [ ! -x "$VENV/bin/python" ] && ! "$PYTHON" -m venv "$VENV"; then
  echo "Could not create a virtual environment in $VENV." >&2
  echo "Fix (Debian/Ubuntu): sudo apt install python3-venv, then run the command again." >&2
  exit 1
fi
pip=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
"${pip[@]}" install --upgrade pip
# pip's progress bar through the download of torch (the rest of this script stays quiet)
loud_pip() { "$VENV/bin/python" -m pip --disable-pip-version-check install --progress-bar on "$@"; }

install_torch() {
  if [ -n "${TORCH_WHEEL:-}" ]; then
    echo "installing torch from $TORCH_WHEEL (once) ..."
    loud_pip "$TORCH_WHEEL"
    return
  fi
  if [ -n "${TORCH_INDEX_URL:-}" ] && ! why=$(reachable "$TORCH_INDEX_URL"); then
    # pip's own local wheels (its find-links) may hold the CPU build: no network for torch
    if "${pip[@]}" install --no-index --no-deps "torch==$TORCH_VERSION+cpu" 2>/dev/null; then
      echo "Cannot reach $TORCH_INDEX_URL ($why): installed torch $TORCH_VERSION+cpu from pip's local wheels instead."
      "${pip[@]}" install "torch==$TORCH_VERSION+cpu"  # its dependencies, from PyPI
      return
    fi
    tag=$("$PYTHON" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
    echo "Cannot reach $TORCH_INDEX_URL ($why), so torch is not installed. Run the same" \
      "command again without TORCH_INDEX_URL (PyPI's CUDA build, which runs on a CPU too:" \
      "2.4 GB more), or fetch torch-$TORCH_VERSION+cpu-$tag-$tag-manylinux_2_28_x86_64.whl" \
      "from that index on a machine that reaches it and run the command with" \
      "TORCH_WHEEL=/path/to/it instead." >&2
    exit 1
  fi
  echo "installing torch $TORCH_VERSION${TORCH_INDEX_URL:+ from $TORCH_INDEX_URL} (once; the large download) ..."
  if [ -z "${TORCH_INDEX_URL:-}" ]; then
    echo "  no NVIDIA GPU? PyPI's torch for Linux is the CUDA build, about 2.4 GB more than the CPU"
    echo "  build: stop (Ctrl-C) and run: make clean; TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu make course"
  fi
  loud_pip "torch==$TORCH_VERSION" ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
}

if ! "$VENV/bin/python" -c 'import torch' 2>/dev/null; then
  install_torch
fi
case ",$EXTRAS," in
  *,test,*) echo "installing the course package, JupyterLab and the test and grading tools ..." ;;
  *,course,*) echo "installing the course package and JupyterLab ..." ;;
  *) echo "installing the course package and the grading tools ..." ;;
esac
# editable, so that the notebooks import this checkout as it is (after a git pull too); -qq keeps
# pip's errors but not setuptools' boxed note on editable installs, which asks nothing of you
"${pip[@]}" -q install -e ".[$EXTRAS]"
if [ -d "$VENV/share/jupyter/lab" ]; then
  # JupyterLab without the "get notified about Jupyter news?" prompt or update checks
  install -D -m 644 tools/jupyterlab-overrides.json \
    "$VENV/share/jupyter/lab/settings/overrides.d/tmm-course.json"
fi
