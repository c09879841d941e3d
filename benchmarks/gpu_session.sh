#!/usr/bin/env bash
# One lent-GPU session's measurements in one call: gpu_speed.py (generate and tune, bare against vhd)
# and hf_annotate_speed.py --real-size, each workload in its own process with its own time limit,
# so that one that fails or runs long still leaves the others' rows. Logs and JSON go to $OUT
# (or ./gpu-out): eight files, the most a device call brings back.
#
# The GPU machine has torch, transformers 5.17, accelerate, numpy and Pillow, but no diffusers,
# pydantic, PyAV or platformdirs and no network (../shared/OFFLINE.md). Bring the missing wheels
# for CPython 3.12 into .whl/ first (here, from the repository root; about 57 MB):
#
#   python -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     -d .whl diffusers==0.42.1 pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0 \
#     typing-inspection==0.4.5 httpx2==2.16.2 httpcore2==2.16.2 truststore==0.10.5 dill==0.4.1 \
#     sniffio==1.3.1 platformdirs==4.14.8 av==18.1.0 transformers==5.23.0 importlib_metadata==10.2.0 \
#     typing_extensions==4.16.0
#
# then run this script there with `.whl` carried (`bash benchmarks/gpu_session.sh`). transformers is
# carried because the processors the benchmarks build without torchvision (`*ImageProcessorPil`)
# arrived in 5.18. Each step's limit in seconds can be changed with GPU_SESSION_LIMITS
# ("sdxl hf tune animatediff"), and GPU_SESSION_ONLY names the steps to run (default: all four).
set -u
out=${OUT:-gpu-out}
mkdir -p "$out"
read -r lim_sdxl lim_hf lim_tune lim_ad <<<"${GPU_SESSION_LIMITS:-200 140 130 200}"

if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "installing the carried wheels failed"; exit 1; }
  export PYTHONPATH=/tmp/site:src:.
else
  export PYTHONPATH=src:.
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HOME=/tmp/hf PYTHONUNBUFFERED=1
export TMPDIR=/dev/shm  # the random-weight models are saved and loaded again: memory, not disk
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
python3 -c "import torch, transformers, diffusers; print('torch', torch.__version__, 'transformers', transformers.__version__, 'diffusers', diffusers.__version__)"

only=" ${GPU_SESSION_ONLY:-sdxl hf_annotate tune animatediff} "
step() {  # step NAME LIMIT COMMAND...
  local name=$1 limit=$2
  shift 2
  [[ $only == *" $name "* ]] || return 0
  local start=$SECONDS
  echo "=== $name (limit ${limit}s)"
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  echo "=== $name rc=$rc in $((SECONDS - start))s"
  grep -v -E 'it/s\]|s/it\]|^Loading|^Writing|^\s*$' "$out/$name.log" | tail -30
}

step sdxl "$lim_sdxl" python3 benchmarks/gpu_speed.py --only sdxl --out "$out/sdxl.json"
step hf_annotate "$lim_hf" python3 benchmarks/hf_annotate_speed.py --real-size --samples 16 --new-tokens 32 \
  --cache-mb 0 4096 --concurrency 64 --batch-size 64 --prefill --out "$out/hf_annotate.json"
step tune "$lim_tune" python3 benchmarks/gpu_speed.py --only tune --out "$out/tune.json"
step animatediff "$lim_ad" python3 benchmarks/gpu_speed.py --only animatediff --out "$out/animatediff.json"
