#!/usr/bin/env bash
# The test venv, cached across CI runs by what decides its contents.
#   tools/ci_venv.sh           restore .venv from the cache (hard links: seconds), when there is one
#   tools/ci_venv.sh --save    after the README's test command: keep .venv in the cache for the next run
# The key hashes pyproject.toml's [project] table (dependencies, extras), constraints/test.txt and
# the Python version: any change there misses the cache, and the README's command builds .venv from
# scratch as it would on a fresh machine. A restored venv is the same files, hard-linked; its
# scripts' interpreter lines are re-pointed at this clone's .venv, and the README's command then
# only re-points the editable install (pip finds everything else satisfied). Nothing is restored
# where hard links cannot be made (another file system) or the copy does not import.
# VHD_CI_VENV_CACHE picks the parent folder (default ~/.cache/vhd); VHD_CI_NO_CACHE=1 turns it off.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3.11}"
[[ "${VHD_CI_NO_CACHE:-}" == 1 ]] && exit 0
project=$("$python" -c 'import json, tomllib; print(json.dumps(tomllib.load(open("pyproject.toml", "rb"))["project"], sort_keys=True))')
key=$({ echo "$project"; cat constraints/test.txt; "$python" -VV; } | sha256sum | cut -c1-16)
parent="${VHD_CI_VENV_CACHE:-$HOME/.cache/vhd}"
cache="$parent/ci-venv-$key"
here="$PWD/.venv"

repoint() {  # the interpreter line of every script in $1/bin names $1's python
  local dir=$1 f
  for f in "$dir"/bin/*; do
    [[ -f $f && ! -L $f ]] || continue
    if head -c 2 "$f" | grep -q '^#!' && head -n 1 "$f" | grep -q '/bin/python[0-9.]*$'; then
      sed -i "1s|^#!.*/bin/python[0-9.]*\$|#!$dir/bin/python|" "$f"  # sed -i writes a new file: the link is cut
    fi
  done
}

if [[ "${1:-}" == --save ]]; then
  [[ -x .venv/bin/python ]] || exit 0
  # invisible-watermark is installed without its opencv-python on purpose (.ci/run says why)
  problems=$(.venv/bin/python -m pip check 2>&1 | grep -v -e '^invisible-watermark .* requires opencv-python' -e '^rapidocr-onnxruntime .* requires opencv-python' \
    -e '^No broken requirements' || true)
  [[ -z "$problems" ]] && .venv/bin/python -c "import vhd, pytest, torch, imwatermark, rapidocr_onnxruntime" || exit 0
  mkdir -p "$parent"
  rm -rf "$cache.new"
  cp -al .venv "$cache.new" 2>/dev/null || { rm -rf "$cache.new"; exit 0; }
  touch "$cache.new/.vhd-complete"
  rm -rf "$cache" && mv "$cache.new" "$cache"
  # keep the three newest caches; older keys are dead
  { ls -dt "$parent"/ci-venv-* 2>/dev/null || true; } | tail -n +4 | xargs -r rm -rf
  echo "$cache"
  exit 0
fi

rm -rf .venv
[[ -f "$cache/.vhd-complete" ]] || exit 0
if cp -al "$cache" .venv 2>/dev/null; then
  rm -f .venv/.vhd-complete
  repoint "$here"
  if .venv/bin/python -c "import pytest, torch" 2>/dev/null; then
    echo "$cache"
    exit 0
  fi
fi
rm -rf .venv  # made from scratch by the README's command
