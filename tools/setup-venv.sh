#!/usr/bin/env bash
# Create the course's virtual environment (.venv) and install everything into it.
#   PYTHON=python3.12 bash tools/setup-venv.sh     # pick the interpreter (3.10 or newer)
#   TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu bash tools/setup-venv.sh
#                                                  # CPU-only torch: a far smaller download
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}

if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
  echo "tmm-course needs Python 3.10 or newer; '$PYTHON' is $("$PYTHON" --version 2>&1)." >&2
  echo "Fix: install a newer Python and run: PYTHON=python3.12 make test" >&2
  exit 1
fi
if ! "$PYTHON" -m venv "$VENV"; then
  echo "Could not create a virtual environment in $VENV." >&2
  echo "Fix (Debian/Ubuntu): sudo apt install python3-venv, then run the command again." >&2
  exit 1
fi
pip=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
"${pip[@]}" install --upgrade pip
if ! "$VENV/bin/python" -c 'import torch' 2>/dev/null; then
  echo "installing torch $TORCH_VERSION (once; this is the large download) ..."
  "${pip[@]}" install "torch==$TORCH_VERSION" ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
fi
echo "installing the course package, JupyterLab and the test tools ..."
"${pip[@]}" install -e ".[course,test]"
