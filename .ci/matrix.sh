#!/usr/bin/env bash
# One job of the version matrix, run the way learners run the course: a fresh virtual
# environment holding a pinned set of packages, the course installed from git or its wheel (not
# editable), every notebook executed from a folder with nothing beside it, and the tests of the
# interpreter hooks run against the installed package.
#
#   bash .ci/matrix.sh colab    # Python 3.13 and Colab's pins; the notebooks' own install command
#   bash .ci/matrix.sh oldest   # Python 3.10 and the lower bounds of pyproject.toml; the wheel
set -euo pipefail
job=${1:?usage: bash .ci/matrix.sh colab|oldest}
root=$(cd "$(dirname "$0")/.." && pwd)
case $job in
  colab) version=3.13 ;;
  oldest) version=3.10 ;;
  *) echo "unknown job '$job': expected colab or oldest" >&2; exit 2 ;;
esac
pins="$root/.ci/pins/$job.txt"
python=$(ls -d "$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"/versions/"$version".*/bin/python"$version" 2>/dev/null | sort -V | tail -n 1)
if [ -z "$python" ]; then
  echo "Python $version not found under pyenv: install it (pyenv install $version) and rerun." >&2
  exit 1
fi
work=$(mktemp -d)
export PYDEVD_DISABLE_FILE_VALIDATION=1  # ipykernel 6.17 on Python 3.13 warns otherwise
trap 'rm -rf "$work"' EXIT
start=$(date +%s)
echo "== $job: $("$python" --version), pins from ${pins#"$root"/}"
"$python" -m venv "$work/venv"
py="$work/venv/bin/python"
pip=("$py" -m pip --disable-pip-version-check -q)
"${pip[@]}" install -r "$pins"
"${pip[@]}" freeze | sort > "$work/before.txt"

if [ "$job" = colab ]; then
  # the notebooks' install cell itself, as Colab runs it, pointed at this checkout
  url="git+file://$root@$(git -C "$root" rev-parse HEAD)"
  "$py" "$root/.ci/install_command.py" "$root/notebooks/00_start_here.ipynb" "$url" > "$work/cell.py"
  echo "install cell, from $url:"
  (cd "$work" && "$py" cell.py)
else
  "${pip[@]}" wheel --no-deps -w "$work/dist" "$root"
  "${pip[@]}" install "$work"/dist/tmm_course-*.whl
fi

# nothing that was pinned may have moved
"${pip[@]}" freeze | sort > "$work/after.txt"
moved=$("$py" "$root/.ci/compare_pins.py" "$pins" "$work/before.txt" "$work/after.txt")
if [ -n "$moved" ]; then
  echo "installing the course changed pinned packages:" >&2
  echo "$moved" >&2
  exit 1
fi
echo "pinned packages unchanged by the install"

# test tools, never moving a pin
"${pip[@]}" install -c "$pins" pytest nbval nbclient
installed=$(date +%s)
echo "== $job: installed in $(( installed - start )) s"
# .ci/run installs while its own tests run, and starts these once they are done (MATRIX_GO: a
# file it creates then), so that the two never share the CPU
if [ -n "${MATRIX_GO:-}" ]; then
  while [ ! -e "$MATRIX_GO" ]; do sleep 5; done
fi
start=$(date +%s)
mkdir "$work/empty"
cp "$root"/notebooks/*.ipynb "$work/empty/"
count=$(ls "$work"/empty/*.ipynb | wc -l)
(cd "$work/empty" && "$py" -m pytest -q -p no:cacheprovider --rootdir "$work/empty" \
  --nbval-lax --nbval-current-env --nbval-cell-timeout=180 ./*.ipynb)
(cd "$root" && TMM_EXPECT_INSTALLED=1 "$work/venv/bin/pytest" -q -p no:cacheprovider \
  -o addopts="" tests/test_memory_guard.py tests/test_check.py tests/test_environment.py \
  tests/test_results.py tests/test_viz.py tests/test_gpu_tiers.py tests/test_claims_compiled.py \
  tests/test_capstone_compiles.py tests/test_gpus.py)
echo "== $job: $count notebooks from an empty folder, installed package; tested in $(( $(date +%s) - start )) s"
