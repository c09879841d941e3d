"""``vhd generate``: prompts to images and videos with provenance, registered as synthetic samples."""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any

from vhd.cli.executor_flags import add_executor_flags, executor_options
from vhd.cli.habits import examples
from vhd.errors import ConfigError
from vhd.registry import Registry, RegistryNames

EXAMPLES = examples(
    "vhd generate prompts.csv --generator sdxl --out synth/ --store run.db",
    "vhd generate prompts.csv --generator animatediff-i2v --first-frames synth/ --out synth/ --store run.db",
    "vhd generate prompts.csv --generator sdxl --out synth/ --executor ray --workers 8 --gpus-per-worker 1",
    "vhd generate prompts.csv --generator sdxl --preset lightning-4step --vae fp16-fix --dtype float16 --out fast/",
)


def _generators() -> Registry[Any]:
    from vhd.synth.generators import GENERATORS

    return GENERATORS


def add_parser(sub: Any, name: str) -> None:
    """Register the command."""
    p = sub.add_parser(
        name,
        help="generate images and videos from a prompt CSV (diffusers), with provenance",
        description=(
            "Generate one image or video per prompt of a CSV (a 'prompt' column; keyword, id, negative_prompt and "
            "seed optional) and register them as synthetic samples. Each prompt's seed is a hash of --seed and its "
            "id; provenance goes into the file (PNG text chunk, WebP XMP, MP4 comment) and the store, and a signed "
            "C2PA manifest (Content Credentials: created by a trained algorithm) when vhd[c2pa] is installed. "
            "Encoding and saving overlap the next pipeline call. A rerun skips what is done; Ctrl-C finishes the "
            "batches in flight. Prompts combining minors with sexual content are refused."
        ),
        epilog=EXAMPLES,
    )
    p.add_argument("prompts", metavar="PROMPTS_CSV", help="CSV with a prompt column")
    gen = p.add_argument("--generator", required=True, metavar="NAME[:PATH_OR_ID]", help="%(generators)s")
    vars(gen).update(generators=RegistryNames(_generators, describe=True))
    p.add_argument("--out", required=True, metavar="DIR", help="folder for the files (named by content hash)")
    p.add_argument("--store", metavar="DB", help="register outputs in this store (and resume from it)")
    p.add_argument("--component", action="append", default=[], metavar="NAME=ID_OR_PATH",
                   help="a part to load beside the model, e.g. motion_adapter=ID")  # fmt: skip
    p.add_argument("--first-frames", metavar="DIR", help="image-to-video: images made earlier (PNG provenance)")
    p.add_argument("--seed", type=int, default=0, help="base seed (0); each prompt's seed is derived from it")
    p.add_argument("--steps", type=int, metavar="N", help="inference steps (generator default)")
    p.add_argument("--guidance", type=float, metavar="G", help="guidance scale (generator default)")
    p.add_argument("--size", metavar="WxH", help="output size, e.g. 512x512 (generator default)")
    p.add_argument("--num-frames", type=int, metavar="N", help="frames per video (16)")
    p.add_argument("--negative-prompt", metavar="TEXT", help="for rows without a negative_prompt")
    p.add_argument("--template", metavar="TEXT_OR_PRESET", help="prompt template with {prompt}, or paper-photo/plain")
    p.add_argument("--batch-size", type=int, default=1, metavar="N", help="prompts per pipeline call (1)")
    p.add_argument("--device", metavar="DEVICE", help="cuda, cuda:N, mps or cpu (default: a GPU, else an error)")
    p.add_argument("--dtype", choices=("auto", "float32", "float16", "bfloat16"), default="auto", help="(auto)")
    p.add_argument("--limit", type=int, metavar="N", help="only the first N prompts")
    p.add_argument("--keep-frames", metavar="DIR", help="also write video frames as DIR/<stem>/<stem>_<k:04d>.png")
    p.add_argument("--no-watermark", action="store_true", help="do not apply the invisible watermark")
    p.add_argument("--no-safety-checker", action="store_true",
                   help="turn an SD pipeline's safety checker off (recorded in provenance)")  # fmt: skip
    p.add_argument("--block-hashes", metavar="FILE", help="hash block list applied when registering")
    p.add_argument("--revision", metavar="REV", help="hub revision of the model")
    p.add_argument("--compile", action="store_true", help="torch.compile the denoiser")
    p.add_argument("--attention-slicing", action="store_true", help="less memory, slower")
    p.add_argument("--vae-tiling", action="store_true", help="decode in tiles (large sizes, small GPUs)")
    p.add_argument("--cpu-offload", action="store_true", help="keep parts on the CPU until used (accelerate)")
    p.add_argument("--image-format", choices=("png", "webp"), default="png", help="png (default) or lossless webp")
    p.add_argument("--png-level", type=int, default=1, metavar="0-9",
                   help="zlib level of PNGs (1: fast; 6: smaller); the same pixels either way")  # fmt: skip
    c2pa = p.add_mutually_exclusive_group()
    c2pa.add_argument("--c2pa", dest="c2pa", action="store_const", const="on", default="auto",
                      help="sign Content Credentials into each output (default: with vhd[c2pa])")  # fmt: skip
    c2pa.add_argument("--no-c2pa", dest="c2pa", action="store_const", const="off",
                      help="no C2PA manifest (outputs byte-identical across runs)")  # fmt: skip
    p.add_argument("--preset", metavar="NAME",
                   help="fast sdxl preset: lightning-2step, -4step or -8step (SDXL-Lightning)")  # fmt: skip
    p.add_argument("--channels-last", action="store_true", help="channels-last memory format for UNet and VAE")
    p.add_argument("--attention", choices=("sdpa", "flash", "efficient", "math", "cudnn"),
                   help="force a scaled-dot-product attention kernel (default: torch chooses)")  # fmt: skip
    p.add_argument("--vae", metavar="ID_OR_PATH", help="VAE to use, e.g. fp16-fix (the fp16-safe SDXL VAE: no upcast)")
    p.add_argument("--unet-weights", metavar="FILE_OR_HUB_FILE",
                   help="UNet weights (.safetensors) over the model's, e.g. a distilled UNet")  # fmt: skip
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_executor_flags(p, ship_media=False)
    p.set_defaults(handler=run)


def parse_size(text: str | None) -> tuple[int, int] | None:
    """``WxH`` -> ``(width, height)`` (multiples of 8)."""
    if text is None:
        return None
    match = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", text)
    if not match or int(match.group(1)) % 8 or int(match.group(2)) % 8 or not int(match.group(1)) * int(match.group(2)):
        raise ConfigError(f"--size {text!r} must be WIDTHxHEIGHT in multiples of 8, e.g. 512x512")
    return int(match.group(1)), int(match.group(2))


def parse_components(values: list[str]) -> dict[str, str]:
    """``NAME=ID_OR_PATH`` pairs."""
    found = {}
    for value in values:
        key, sep, ident = value.partition("=")
        if not sep or not key.strip() or not ident.strip():
            raise ConfigError(f"--component {value!r} must be NAME=ID_OR_PATH, e.g. motion_adapter=/models/adapter")
        found[key.strip()] = ident.strip()
    return found


def _user_signing() -> dict[str, str]:
    """The ``[c2pa]`` table of the user config (the signing certificate, paths made absolute), empty without one."""
    from pathlib import Path

    from vhd.config import load_config

    config = load_config(None)
    signing = ("cert", "key", "alg", "tsa_url")  # the trust anchors of the same table are for reading
    found: dict[str, str] = {str(k): v for k, v in config.c2pa.items() if k in signing}
    for key in ("cert", "key"):
        if key in found and config.base_dir and not Path(found[key]).expanduser().is_absolute():
            found[key] = str(Path(config.base_dir) / found[key])
    return found


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from vhd.progress import bar
    from vhd.synth.generate import generate
    from vhd.synth.generators import GenerateSettings

    for flag in ("batch_size", "steps", "num_frames", "limit"):
        value = getattr(args, flag)
        if value is not None and value < (0 if flag == "limit" else 1):
            raise ConfigError(f"--{flag.replace('_', '-')} must be at least {0 if flag == 'limit' else 1}")
    settings = GenerateSettings(
        steps=args.steps,
        guidance=args.guidance,
        size=parse_size(args.size),
        num_frames=args.num_frames,
        negative_prompt=args.negative_prompt,
        template=args.template,
        device=args.device,
        dtype=args.dtype,
        batch_size=args.batch_size,
        watermark=not args.no_watermark,
        safety_checker=not args.no_safety_checker,
        components=parse_components(args.component),
        revision=args.revision,
        compile=args.compile,
        attention_slicing=args.attention_slicing,
        vae_tiling=args.vae_tiling,
        cpu_offload=args.cpu_offload,
        image_format=args.image_format,
        png_level=args.png_level,
        content_credentials=args.c2pa,
        signing=_user_signing() if args.c2pa != "off" else {},
        channels_last=args.channels_last,
        attention=args.attention,
        vae=args.vae,
        unet_weights=args.unet_weights,
    )
    from vhd.synth.credentials import credentials_state
    from vhd.synth.generators import create_generator, resolve_device
    from vhd.synth.outputs import encoding_name
    from vhd.synth.speed import apply_preset

    settings = apply_preset(settings, args.preset)
    encoding_name(settings.image_format, settings.png_level)  # a bad --png-level fails before loading a model
    credentials_state(settings)  # --c2pa without c2pa-python installed: exit 2 now

    generator = create_generator(args.generator, settings)
    options = executor_options(args)
    if args.executor == "local":
        resolve_device(settings.device)  # no GPU and no --device: exit 2 before loading anything
    else:
        from vhd.synth.work import check_worker_device

        check_worker_device(settings, options)  # workers without a GPU: exit 2 before starting any
    if settings.watermark:
        from vhd.synth.outputs import Watermarker

        Watermarker()  # fails now, before loading a model, when invisible-watermark is missing
    store_cm: Any
    if args.store:
        from vhd.store.sqlite import Store

        store_cm = Store(args.store, create=True)
    else:
        import contextlib

        store_cm = contextlib.nullcontext()
    unit = "videos" if generator.kind.value == "video" else "images"
    with store_cm as store, bar("generating", not (args.no_progress or args.json), unit=unit) as on_progress:
        result = generate(
            args.prompts,
            generator,
            args.out,
            store=store,
            seed=args.seed,
            limit=args.limit,
            keep_frames=args.keep_frames,
            first_frames=args.first_frames,
            block_list=args.block_hashes,
            progress=on_progress,
            executor=args.executor,
            executor_options=options,
        )
    summary = result.to_dict()
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(
            f"{summary['written']} {unit} written to {args.out} ({summary['samples']} registered), "
            f"{summary['done_before']} done before, {len(result.refused)} refused by the safety floor, "
            f"{len(result.blacked_out)} blacked out by the safety checker, {len(result.failed)} failed"
        )
        for ident, why in result.refused + result.blacked_out + result.failed:
            print(f"  {ident}: {why}", file=sys.stderr)
        if result.interrupted:
            print("interrupted: run the same command again to go on", file=sys.stderr)
    if result.interrupted:
        return 130
    return 1 if result.failed else 0
