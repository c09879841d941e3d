"""Which transformers releases run the default model's family Pillow-only (no torchvision).

The ``local`` extra installs no torchvision, so its ``transformers`` floor must be a release whose
Idefics3 (SmolVLM) processor falls back to the Pillow image processor when torchvision is absent.
For each version given, this installs that transformers and the huggingface-hub it asks for
(``pip install --no-deps --target``, nothing else) into a scratch folder, and in a fresh
interpreter loads a tiny random Idefics3 saved the way the hub's SmolVLM is
(``image_processor_type: Idefics3ImageProcessor``) with ``AutoProcessor``, preprocesses an image
and generates two tokens. Run it in an environment without torchvision::

    python tools/transformers_floor.py 5.16.0 5.17.0 5.18.0 5.23.0

Last run (2026-11-27): 5.16.0 and 5.17.0 FAIL
("Could not load any image processor class ... Missing optional dependencies: torchvision");
5.18.0 to 5.23.0 OK with ``Idefics3ImageProcessorPil``. Hence ``transformers>=5.18``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import transformers
from PIL import Image
try:
    proc = transformers.AutoProcessor.from_pretrained({model!r})
    chat = [{{"role": "user", "content": [{{"type": "image"}}, {{"type": "text", "text": "hi"}}]}}]
    prompt = proc.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    inputs = proc(text=[prompt], images=[[Image.new("RGB", (40, 30), (1, 2, 3))]], return_tensors="pt")
    model = transformers.AutoModelForImageTextToText.from_pretrained({model!r})
    model.generate(**inputs, max_new_tokens=2, do_sample=False)
    print("OK", type(proc.image_processor).__name__)
except Exception as exc:
    print("FAIL", type(exc).__name__, str(exc).splitlines()[0][:160])
"""


def _install(target: Path, requirement: str) -> None:
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), requirement]
    subprocess.run(pip, check=True)


def main(versions: list[str]) -> int:
    """Probe each version; print one line each. Returns 0."""
    sys.path.insert(0, str(ROOT))
    from tests.tiny_models import build_tiny_idefics3

    with tempfile.TemporaryDirectory() as scratch:
        model = build_tiny_idefics3(Path(scratch) / "idefics3")
        for version in versions:
            target = Path(scratch) / version
            _install(target, f"transformers=={version}")
            metadata = next(target.glob("transformers-*.dist-info")) / "METADATA"
            hub = re.search(r"^Requires-Dist: (huggingface-hub[^;\n]*)", metadata.read_text(), re.MULTILINE)
            if hub:
                _install(target, hub.group(1).replace(" ", ""))
            done = subprocess.run(
                [sys.executable, "-c", PROBE.format(model=str(model))],
                env={**os.environ, "PYTHONPATH": str(target), "HF_HUB_OFFLINE": "1"},
                capture_output=True,
                text=True,
            )
            lines = (done.stdout or done.stderr).strip().splitlines()
            print(f"transformers {version}: {lines[-1] if lines else 'no output'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:] or ["5.17.0", "5.18.0"]))
