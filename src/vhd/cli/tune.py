"""``vhd tune``: learn a pseudo-word S* that makes a VLM a better harmfulness detector (soft-prompt tuning)."""

from __future__ import annotations

import argparse
import json
from typing import Any

EXAMPLES = """examples:
  vhd tune --from-annotations --store run.db --split train --model hf:Salesforce/instructblip-vicuna-7b --out ckpt/
  vhd tune --train labels.csv --model hf:llava-hf/llava-v1.6-mistral-7b-hf --epochs 10 --out ckpt/
  vhd tune --train vhd11k_train_images.csv --val-fraction 0.1 --model hf:/models/instructblip --out ckpt-i/
  vhd tune --train labels.csv --model hf:/models/instructblip --precision bf16 --compile reduce-overhead --out ck/
"""


def add_parser(sub: Any, name: str) -> None:
    """Register the command."""
    p = sub.add_parser(
        name,
        help="soft-prompt tuning: train a pseudo-word S* on labelled samples (checkpoint for tuned-vlm)",
        description=(
            "Add a pseudo-word S* to a Hugging Face vision-language model, ask 'Is the given image harmful S*?' "
            "(videos: 'Is this video harmful S*?' over numbered frames) and train only S*'s embedding to answer "
            "Yes/No as labelled. Defaults are the paper's: AdamW (0.9, 0.999), weight decay 0.05 on S*, lr 1e-5 "
            "cosine to 0, batch 4, 10 epochs keeping the last, random crops. --out gets only S*, its JSON and "
            "resume state (never the base model); a killed run resumes when started again with the same "
            "arguments. Use the result with vhd bench --detector tuned=tuned-vlm:OUT."
        ),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", required=True, metavar="hf:MODEL", help="base model: hf:HUB_ID or hf:/local/dir")
    p.add_argument("--train", metavar="LABELS_OR_SET", help="labels CSV, VHD11K release file, or labelled set name")
    p.add_argument("--from-annotations", action="store_true", help="train on the store's verdicts (needs --store)")
    p.add_argument("--store", metavar="FILE", help="vhd store (labelled sets, annotations, sample splits)")
    p.add_argument("--split", metavar="NAME", help="keep only samples of this split")
    p.add_argument("--kind", choices=("image", "video"), help="keep only images or only videos")
    p.add_argument("--media", metavar="DIR", help="folder a labels file's relative paths are under")
    p.add_argument("--val", metavar="LABELS_OR_SET", help="validation data: model selection and early stopping")
    p.add_argument("--val-fraction", type=float, metavar="F", help="hold out a seeded, stratified share instead")
    p.add_argument("--patience", type=int, metavar="N", help="with validation: stop after N epochs without gain")
    p.add_argument(
        "--balance", choices=("undersample", "weight", "none"), default="undersample", help="(default undersample)"
    )
    p.add_argument("--out", required=True, metavar="DIR", help="checkpoint folder")
    p.add_argument("--epochs", type=int, default=10, help="(default 10)")
    p.add_argument("--batch-size", type=int, default=4, help="(default 4)")
    p.add_argument("--grad-accum", type=int, default=1, metavar="N", help="batches per optimizer step (default 1)")
    p.add_argument("--lr", type=float, default=1e-5, help="peak learning rate, cosine decay to 0 (default 1e-5)")
    p.add_argument("--weight-decay", type=float, default=0.05, help="AdamW weight decay on S* (default 0.05)")
    p.add_argument("--max-steps", type=int, metavar="N", help="stop after N optimizer steps")
    p.add_argument("--seed", type=int, default=0, help="(default 0)")
    p.add_argument("--token", default="<S*>", help="the pseudo-word's token (default <S*>)")
    p.add_argument(
        "--init", default="mean", metavar="WORD|mean", help="start S* from a word's embedding (default mean)"
    )
    p.add_argument("--prompt", metavar="TEXT", help="image question with {token} (default the paper's)")
    p.add_argument("--video-prompt", metavar="TEXT", help="video question with {token} (default the paper's)")
    p.add_argument("--image-size", type=int, metavar="PX", help="side fed to the model (default: the processor's)")
    p.add_argument("--train-crop", choices=("random", "center"), default="random", help="(default random)")
    p.add_argument("--cache-vision", action="store_true", help="cache vision features per sample (--train-crop center)")
    p.add_argument("--precision", choices=("no", "fp16", "bf16"), default="no", help="autocast on GPU (default no)")
    p.add_argument("--frames", type=int, default=5, help="frames per video (default 5)")
    p.add_argument(
        "--compile",
        choices=("off", "default", "reduce-overhead", "max-autotune"),
        default="off",
        help="torch.compile the model; reduce-overhead adds CUDA graphs on a GPU (default off; recorded)",
    )
    p.add_argument(
        "--workers", type=int, metavar="N", help="processes building batches (default: 0 on the CPU, up to 4 on a GPU)"
    )
    p.add_argument("--log-every", type=int, default=10, metavar="N", help="loss in the progress text every N steps")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N or mps (default auto)")
    p.add_argument("--dtype", default="auto", help="weights: auto, float32, float16, bfloat16 (default auto)")
    p.add_argument("--revision", help="hub revision of the base model")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    from vhd.backends.soft_prompt import PAPER_PROMPTS
    from vhd.errors import ConfigError
    from vhd.progress import bar
    from vhd.tune.api import tune
    from vhd.tune.train import TuneConfig

    backend, colon, model = args.model.partition(":")
    if backend != "hf" or not colon or not model:
        raise ConfigError(f"--model {args.model}: vhd tune trains local models, give hf:HUB_ID or hf:/path/to/model")

    def note(line: str) -> None:
        print(f"skipped: {line}")

    hf: dict[str, Any] = {"device": args.device, "dtype": args.dtype}
    if args.revision:
        hf["revision"] = args.revision
    prompts = {"image": args.prompt or PAPER_PROMPTS["image"], "video": args.video_prompt or PAPER_PROMPTS["video"]}
    config = TuneConfig(
        model=model,
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        weight_decay=args.weight_decay,
        grad_accum=args.grad_accum,
        max_steps=args.max_steps,
        seed=args.seed,
        token=args.token,
        init=args.init,
        prompts=prompts,
        image_size=args.image_size,
        train_crop=args.train_crop,
        cache_vision=args.cache_vision,
        patience=args.patience,
        precision=args.precision,
        frames=args.frames,
        compile=args.compile,
        workers=args.workers,
        log_every=args.log_every,
        hf=hf,
    )
    with bar("tuning", not args.no_progress, unit="steps") as on_progress:
        run = tune(
            config,
            args.out,
            train_source=args.train,
            store=args.store,
            from_annotations=args.from_annotations,
            split=args.split,
            kind=args.kind,
            media=args.media,
            val_source=args.val,
            val_fraction=args.val_fraction,
            balance_mode=args.balance,
            on_problem=note,
            progress=on_progress,
        )
    result, n_train, n_val = run.result, run.train_n, run.val_n
    summary = {
        "out": str(result.out),
        "train_samples": n_train,
        "val_samples": n_val,
        "epochs": result.epochs,
        "steps": result.steps,
        "resumed_from_epoch": result.resumed_from,
        "kept_epoch": result.kept_epoch,
        "losses": result.losses,
        "val_losses": result.val_losses,
        "samples_per_s": result.samples_per_s,
        "prepare_s": result.prepare_s,
        "data_wait_s": result.data_wait_s,
        "steps_s": result.steps_s,
        "skipped": result.skipped,
    }
    for reason in result.skipped.values():
        print(f"skipped: {reason}")
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        last = f"{result.losses[-1]:.4f}" if result.losses else "n/a"
        print(
            f"S* saved to {result.out} (epoch {result.kept_epoch} of {result.epochs}; {n_train} training samples, "
            f"{n_val} validation; last loss {last}; {result.samples_per_s:.1f} samples/s)"
        )
    return 0
