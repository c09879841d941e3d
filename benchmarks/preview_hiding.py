"""How much shape `vhd serve`'s default preview keeps: edge energy of the preview over the original's.

Data: the example media (six skimage photos, the drawn video's frames) and the shape examples
(skimage's horse, a drawn figure and hand silhouette, line art with text, a checkerboard), written
to a temporary folder. For each image, the default preview (``vhd.serve.thumbs.render(image,
Look())``, what the gallery sends) is compared with the original by the mean absolute gradient of
the grayscale image at 128 px (defined here, so that two checkouts are measured the same way).
The rule (issue 26): at most 0.25 on every sample.

Usage:
    python benchmarks/preview_hiding.py
    VHD_SRC=/path/to/other/src python benchmarks/preview_hiding.py   # another checkout's previews
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, os.environ.get("VHD_SRC") or str(ROOT / "src"))

from vhd import demo  # noqa: E402
from vhd.media.image import open_image  # noqa: E402
from vhd.media.video import read_frames  # noqa: E402
from vhd.serve import thumbs  # noqa: E402


def gradient(image: Any, side: int = 128) -> float:
    """Mean absolute difference of neighbouring pixels (across and down) of the grayscale image at ``side`` px."""
    from PIL import ImageChops, ImageOps, ImageStat

    gray = ImageOps.grayscale(image.convert("RGB"))
    gray.thumbnail((side, side))
    w, h = gray.size
    across = ImageChops.difference(gray.crop((1, 0, w, h)), gray.crop((0, 0, w - 1, h)))
    down = ImageChops.difference(gray.crop((0, 1, w, h)), gray.crop((0, 0, w, h - 1)))
    return float((ImageStat.Stat(across).mean[0] + ImageStat.Stat(down).mean[0]) / 2 / 255)


def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="vhd-preview-hiding-"))
    images: list[tuple[str, Any]] = []
    # the shapes are drawn by this checkout's code, whichever checkout's previews are measured
    draw = f"from vhd.demo import write_shape_examples as w; w({str(folder / 'shapes')!r})"
    subprocess.run([sys.executable, "-c", draw], env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, check=True)
    shapes = sorted((folder / "shapes").glob("*.png"))
    for path in shapes + [p for p in demo.write_examples(folder) if p.suffix in (".jpg", ".png")]:
        images.append((path.name, open_image(path)))
    frames = read_frames(folder / demo.VIDEO_NAME, 5).images
    images += [(f"{demo.VIDEO_NAME}#{k}", frame) for k, frame in enumerate(frames)]
    print(f"{'sample':28s} ratio")
    worst = 0.0
    for name, image in images:
        ratio = gradient(thumbs.render(image, thumbs.Look())) / gradient(image)
        worst = max(worst, ratio)
        print(f"{name:28s} {ratio:.3f}")
    print(f"{'worst':28s} {worst:.3f}  (rule: <= 0.25)")


if __name__ == "__main__":
    main()
