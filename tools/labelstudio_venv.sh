#!/usr/bin/env bash
# Create (once) the virtualenv Label Studio runs from, apart from vhd's own: its pins (Django,
# numpy, pydantic, ...) conflict easily with vhd's. About 1 GB and a minute; cached afterwards.
#   tools/labelstudio_venv.sh            -> prints the venv's folder
# VHD_LABELSTUDIO_VENV picks the folder (default ~/.cache/vhd/labelstudio-venv) and
# VHD_LABELSTUDIO_VERSION the release (default 1.23.2, the one vhd's tests ran against).
# A venv whose creation did not finish (no .vhd-complete marker) is made again.
set -euo pipefail
venv="${VHD_LABELSTUDIO_VENV:-$HOME/.cache/vhd/labelstudio-venv}"
version="${VHD_LABELSTUDIO_VERSION:-1.23.2}"
python="${PYTHON:-python3.11}"
if [[ -f "$venv/.vhd-complete" ]]; then
  echo "$venv"
  exit 0
fi
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv"
"$venv/bin/pip" install -q "label-studio==$version" >&2
"$venv/bin/python" -c "import label_studio; print(label_studio.__version__)" > "$venv/.vhd-complete"
echo "$venv"
