#!/usr/bin/env bash
# Create the course's virtual environment (.venv) and install one role's tools into it.
#   EXTRAS=course bash tools/setup-venv.sh              # a learner: the course and JupyterLab
#   EXTRAS=course,test,grade bash tools/setup-venv.sh   # make test: adds the test and grading tools
#   PYTHON=python3.12 bash tools/setup-venv.sh          # pick the interpreter (3.10 or newer)
#   TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu bash tools/setup-venv.sh
#                                                       # CPU-only torch: a far smaller download
# torch is installed once, by whichever command creates .venv first; the CPU hint only counts then.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
EXTRAS=${EXTRAS:-course}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}

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
if ! "$VENV/bin/python" -c 'import torch' 2>/dev/null; then
  echo "installing torch $TORCH_VERSION${TORCH_INDEX_URL:+ from $TORCH_INDEX_URL} (once; the large download) ..."
  if [ -z "${TORCH_INDEX_URL:-}" ]; then
    echo "  no NVIDIA GPU? PyPI's torch for Linux is the CUDA build, about 2.4 GB more than the CPU"
    echo "  build: stop (Ctrl-C) and run: make clean; TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu make course"
  fi
  # pip's progress bar through the download (the rest of this script stays quiet)
  "$VENV/bin/python" -m pip --disable-pip-version-check install --progress-bar on \
    "torch==$TORCH_VERSION" ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
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
