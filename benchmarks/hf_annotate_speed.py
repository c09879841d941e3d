"""`vhd annotate --model hf:...` throughput: samples/s, calls/s and where the time goes.

Two model sizes, both random weights built offline (nothing is downloaded):

- ``--tiny`` (default on a CPU): the test suite's tiny Idefics3 (tests/tiny_models.py).
- ``--real-size``: an Idefics3 with SmolVLM-256M-Instruct's dimensions (the default model's family
  and size: SigLIP 768x12 vision tower at 512 px with a 4x pixel shuffle, a 576x30 Llama, 9 heads
  / 3 KV heads) and its image processor settings (longest edge 2048, split into 512 px tiles plus
  a global view: up to 17 x 64 image tokens). The tokenizer is the tiny one (the vocabulary is
  the only smaller part). This is the GPU measurement of issue 23; on a CPU it is slow.

Each run annotates ``--samples`` drawn 640x480 images (5 calls each: 2 rounds, then the judge)
with ``--new-tokens`` tokens per call (``min_new_tokens`` = ``max_new_tokens``, so every call
generates exactly that many) in a fresh store, once per ``--cache-mb`` value: ``0`` is the old
path (every call decodes and preprocesses its images again), the default keeps each sample's
preprocessed images for its calls. ``--src`` runs another checkout's code (e.g. main's, which
has no ``preprocess_cache_mb``: pass ``--cache-mb none``).

``--prefill`` also measures, on one judge-sized prompt, a forward pass over the prompt (what
prefix caching could at most save) against ``generate`` with a dynamic KV cache, and with
``--static-cache`` a static one too (compiled on first use: minutes on a GPU).

Usage:
    python benchmarks/hf_annotate_speed.py --tiny --samples 8 --cache-mb 0 1024 --prefill
    python benchmarks/hf_annotate_speed.py --real-size --samples 16 --new-tokens 32 \\
        --cache-mb 0 4096 --concurrency 64 --batch-size 64 --prefill      # on a GPU
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def build_real_size(path: Path) -> Path:
    """An Idefics3 of SmolVLM-256M-Instruct's size and image settings, random weights."""
    import torch
    import transformers as tf
    from tests.tiny_models import _save, _tokenizer, chat_template

    tokenizer = _tokenizer(["<fake_token_around_image>", "<global-img>", "<end_of_utterance>"])
    # the image processor a user's machine would load: torchvision's where it is installed (as on a
    # GPU machine), else Pillow's (the CPU test environment); the run records which one it was
    try:
        import torchvision  # noqa: F401

        processor_class = tf.models.idefics3.Idefics3ImageProcessor
    except ImportError:
        processor_class = tf.models.idefics3.Idefics3ImageProcessorPil
    image_processor = processor_class(
        size={"longest_edge": 2048}, max_image_size={"longest_edge": 512}, do_image_splitting=True
    )
    processor = tf.Idefics3Processor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        image_seq_len=64,
        chat_template=chat_template(end_of_turn="<end_of_utterance>"),
    )
    vision = tf.Idefics3VisionConfig(
        hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12, patch_size=16,
        image_size=512,
    )  # fmt: skip
    text = tf.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
        num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192, rope_theta=100000.0,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    config = tf.Idefics3Config(
        vision_config=vision.to_dict(),
        text_config=text.to_dict(),
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        scale_factor=4,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    model = tf.Idefics3ForConditionalGeneration(config).eval()
    return Path(_save(model, processor, tokenizer, path))


def draw_images(folder: Path, n: int) -> Path:
    """``n`` different 640x480 pictures drawn by code."""
    from PIL import Image, ImageDraw

    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        im = Image.new("RGB", (640, 480), ((37 * i) % 256, (91 * i) % 256, (53 * i) % 256))
        draw = ImageDraw.Draw(im)
        draw.ellipse((40 + i % 50, 60, 400 + i % 90, 420), fill=(255 - (17 * i) % 256, 80, 160))
        draw.rectangle((300, 30 + i % 40, 600, 200), fill=(20, 200 - (7 * i) % 200, 90))
        im.save(folder / f"{i:04d}.png")
    return folder


def annotate_once(
    model: Path, media: Path, store: Path, args: argparse.Namespace, cache_mb: int | None
) -> dict[str, Any]:
    """One `vhd.annotate` run; its figures."""
    from vhd.annotate.api import annotate
    from vhd.config import AnnotateConfig

    hf: dict[str, Any] = {
        "device": args.device,
        "batch_wait_ms": 20,
        "generate_kwargs": {"min_new_tokens": args.new_tokens},
    }
    if args.batch_size:
        hf["max_batch_size"] = args.batch_size
    if cache_mb is not None:
        hf["preprocess_cache_mb"] = cache_mb
    config = AnnotateConfig.model_validate(
        {
            "debate": {"debater_max_tokens": args.new_tokens, "judge_max_tokens": args.new_tokens},
            "backends": {"hf": hf},
        }
    )
    began = time.perf_counter()
    summary = annotate([media], model=f"hf:{model}", store=store, config=config, concurrency=args.concurrency)
    wall = time.perf_counter() - began
    local = next(iter(getattr(summary, "local", {}).values()), {})
    busy = local.get("preprocess_s", 0) + local.get("generate_s", 0)
    return {
        "cache_mb": cache_mb,
        "samples": summary.annotated,
        "calls": summary.usage.calls,
        "wall_s": round(wall, 2),
        "samples_per_s": round(summary.annotated / wall, 3),
        "calls_per_s": round(summary.usage.calls / wall, 2),
        "generated_tokens_per_s": round(summary.usage.completion_tokens / wall, 1),
        "preprocess_share": round(local["preprocess_s"] / busy, 3) if busy else None,
        **{
            k: local[k]
            for k in ("preprocess_s", "generate_s", "image_processor", "image_passes", "batches")
            if k in local
        },
    }


def prefill(
    model_dir: Path, media: Path, device: str, new_tokens: int, repeats: int = 3, *, static: bool = False
) -> dict[str, Any]:
    """Forward pass over a judge-sized prompt vs generate (dynamic, and with ``static`` a static KV cache)."""
    import torch
    import transformers as tf
    from PIL import Image

    processor = tf.AutoProcessor.from_pretrained(model_dir)
    model = tf.AutoModelForImageTextToText.from_pretrained(model_dir).to(device).eval()
    chat = [
        {"role": "system", "content": [{"type": "text", "text": "You judge whether an image is harmful. " * 20}]},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Arguments so far. " * 60}]},
    ]
    prompt = processor.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    image = Image.open(next(media.glob("*.png"))).convert("RGB")
    inputs = {k: v.to(device) for k, v in processor(text=[prompt], images=[[image]], return_tensors="pt").items()}

    def best(fn: Any) -> float:
        times = []
        for _ in range(repeats):
            began = time.perf_counter()
            with torch.inference_mode():
                fn()
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            times.append(time.perf_counter() - began)
        return min(times)

    gen = {"max_new_tokens": new_tokens, "min_new_tokens": new_tokens, "do_sample": False}
    out = {
        "prompt_tokens": int(inputs["input_ids"].shape[1]),
        "prefill_s": round(best(lambda: model(**inputs)), 4),
        "generate_dynamic_s": round(best(lambda: model.generate(**inputs, **gen)), 4),
    }
    if not static:  # compiled on first use: on an H100 it did not finish within 140 s
        out["generate_static_s"] = "not measured (--static-cache)"
        out["prefill_share_of_generate"] = round(out["prefill_s"] / out["generate_dynamic_s"], 3)
        return out
    try:
        out["generate_static_s"] = round(
            best(lambda: model.generate(**inputs, **gen, cache_implementation="static")), 4
        )
    except Exception as exc:  # a model or version without a static cache for it
        out["generate_static_s"] = f"unavailable: {type(exc).__name__}: {str(exc)[:120]}"
    out["prefill_share_of_generate"] = round(out["prefill_s"] / out["generate_dynamic_s"], 3)
    return out


def main() -> int:
    """Build the model, run the configurations, print one JSON document."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--tiny", action="store_true", help="the tiny test Idefics3 (default)")
    size.add_argument("--real-size", action="store_true", help="SmolVLM-256M-sized Idefics3, random weights")
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=0, help="[backends.hf] max_batch_size (0: by device)")
    parser.add_argument(
        "--cache-mb", nargs="+", default=["0", "2048"], help="preprocess_cache_mb values ('none': unset)"
    )
    parser.add_argument("--device", default="auto")
    parser.add_argument("--prefill", action="store_true")
    parser.add_argument("--static-cache", action="store_true", help="with --prefill: also a static KV cache")
    parser.add_argument("--src", default=str(ROOT / "src"), help="the vhd source tree to run")
    parser.add_argument("--out", help="also write the JSON here")
    args = parser.parse_args()
    sys.path[:0] = [args.src, str(ROOT)]
    import torch

    from vhd.backends.hf import resolve_device

    device = resolve_device(args.device)
    result: dict[str, Any] = {
        "machine": platform.platform(),
        "cpu_threads": torch.get_num_threads(),
        "device": torch.cuda.get_device_name(0) if device.startswith("cuda") else device,
        "model": "real-size" if args.real_size else "tiny",
        "settings": {k: v for k, v in vars(args).items() if k not in ("out",)},
        "runs": [],
    }
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        if args.real_size:
            model = build_real_size(tmp / "model")
        else:
            from tests.tiny_models import build_tiny_idefics3

            model = Path(build_tiny_idefics3(tmp / "model"))
        media = draw_images(tmp / "media", args.samples)
        for i, value in enumerate(args.cache_mb):
            cache_mb = None if value == "none" else int(value)
            result["runs"].append(annotate_once(model, media, tmp / f"s{i}.db", args, cache_mb))
            print(json.dumps(result["runs"][-1]), file=sys.stderr)
        if args.prefill:
            result["prefill"] = prefill(model, media, device, args.new_tokens, static=args.static_cache)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
