#!/usr/bin/env bash
# Run every notebook the way a learner does, from the installed course (not this checkout), in
# a folder with nothing beside it; then the unit tests of this checkout against that install.
# For a GPU machine with torch and triton already installed:
#
#   python3 -m pip wheel --no-deps -w dist .        # the course's wheel
#   bash tools/notebooks-from-wheel.sh dist [more wheel folders ...] [-- TEST_FILES ...]
#
# Wheels in the folders are installed into a scratch site (no index, no dependencies), which
# comes first on PYTHONPATH. PYTHONUNBUFFERED is set so progress streams.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
folders=() tests=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do folders+=("$1"); shift; done
[ $# -gt 0 ] && shift && tests=("$@")
site=$(mktemp -d) empty=$(mktemp -d)
wheels=()
for folder in "${folders[@]}"; do wheels+=("$folder"/*.whl); done
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "${wheels[@]}"
export PYTHONPATH=$site PYTHONUNBUFFERED=1
cp "$root"/notebooks/*.ipynb "$empty/"
cd "$empty"
python3 -c 'import tmm_course; print("course from", tmm_course.__file__); tmm_course.report()'
start=$(date +%s)
python3 -m pytest -q -p no:cacheprovider --rootdir "$empty" --nbval-lax --nbval-current-env \
  --nbval-cell-timeout=300 ./*.ipynb
echo "== $(ls ./*.ipynb | wc -l) notebooks from an empty folder in $(( $(date +%s) - start )) s"
if [ ${#tests[@]} -gt 0 ]; then
  cd "$root"
  TMM_EXPECT_INSTALLED=1 python3 -P -m pytest -q -p no:cacheprovider -o addopts="" "${tests[@]}"
fi
