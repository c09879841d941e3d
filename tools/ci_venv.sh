#!/usr/bin/env bash
# Point .venv at the cached test venv for this tree's pins, so the README's test command reuses it.
#   tools/ci_venv.sh        -> prints the cache folder it linked
# The cache key is a hash of pyproject.toml's [project] table, constraints/test.txt and the Python
# version: any change there gets a fresh venv (made by the README's command through the link). A venv whose
# last install did not finish has no .vhd-complete marker and is made again; the README's command
# writes none, so `tools/ci_venv.sh --mark` (after it) marks the linked venv complete when its
# packages are consistent (`pip check`, but for the watermark package's opencv) and vhd, pytest and the no-deps watermark package import.
# VHD_CI_VENV_CACHE picks the parent folder (default ~/.cache/vhd); VHD_CI_NO_CACHE=1 uses a plain .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3.11}"
if [[ "${1:-}" == --mark ]]; then
  [[ -L .venv ]] || exit 0
  # invisible-watermark is installed without its opencv-python on purpose (.ci/run says why)
  problems=$(.venv/bin/python -m pip check 2>&1 | grep -v -e '^invisible-watermark .* requires opencv-python' \
    -e '^No broken requirements' || true)
  [[ -z "$problems" ]] && .venv/bin/python -c "import vhd, pytest, imwatermark" && touch "$(readlink .venv)/.vhd-complete"
  exit $?
fi
if [[ "${VHD_CI_NO_CACHE:-}" == 1 ]]; then
  [[ -L .venv ]] && rm -f .venv
  rm -rf .venv
  exit 0
fi
# only what decides the venv's contents: pyproject's [project] table (dependencies, extras), the pins, Python
project=$("$python" -c 'import json, tomllib; print(json.dumps(tomllib.load(open("pyproject.toml", "rb"))["project"], sort_keys=True))')
key=$({ echo "$project"; cat constraints/test.txt; "$python" -VV; } | sha256sum | cut -c1-16)
parent="${VHD_CI_VENV_CACHE:-$HOME/.cache/vhd}"
venv="$parent/ci-venv-$key"
mkdir -p "$parent"
if [[ ! -f "$venv/.vhd-complete" ]]; then
  rm -rf "$venv"
  # made here, at its real path: the scripts pip writes name their Python by the path the venv
  # was made at, and a clone's .venv link may be gone by the next run
  "$python" -m venv "$venv"
fi
# keep the three newest caches; older keys are dead
{ ls -dt "$parent"/ci-venv-* 2>/dev/null || true; } | tail -n +4 | xargs -r rm -rf
[[ -L .venv || ! -e .venv ]] || rm -rf .venv
ln -sfn "$venv" .venv
echo "$venv"
