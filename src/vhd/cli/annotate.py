"""``vhd annotate``: debate-annotate images, videos, frame folders and manifests."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from typing import Any

from vhd.cli.executor_flags import add_executor_flags, executor_options
from vhd.cli.habits import examples
from vhd.cli.label_flags import add_outside_flag
from vhd.cli.model_flags import add_model_flags, model_overrides
from vhd.defaults import DEFAULT_MODEL, MODEL_ENV
from vhd.fileio import printable


def add_parser(sub: Any, name: str) -> None:
    """Register the command."""
    p = sub.add_parser(
        name,
        help="annotate media by a debate of vision-language models",
        description=(
            "Annotate images, videos, frame folders and manifests (CSV/JSONL with a path column) "
            "by a debate of vision-language models; results go to a SQLite store and the run "
            "resumes where it stopped."
        ),
        epilog=examples(
            "vhd annotate examples/ --model scripted:demo --store demo.db",
            "vhd annotate photos/ clips/ --model openai:gpt-4o --config vhd.toml --policy acme-policy.yaml",
            "vhd annotate photos/ --model vllm-engine:Qwen/Qwen2.5-VL-7B-Instruct --stage-wise --concurrency 64",
            "vhd annotate photos/ --config vhd.toml --executor ray --ray-address auto --workers 8",
            note=(
                f"Model specs are BACKEND:MODEL (backends: openai, hf, vllm-engine, scripted). Without --model, "
                f"${MODEL_ENV} or a config file, every role uses {DEFAULT_MODEL}. Endpoints and keys "
                "go in the config file: [backends.openai] base_url = ... (or base_urls = [...]), api_key_env = ..."
            ),
        ),
    )
    p.add_argument("inputs", nargs="+", metavar="PATH", help="image/video files, folders, manifests")
    add_model_flags(p)
    p.add_argument("--store", default="vhd.db", help="SQLite store (default: vhd.db)")
    p.add_argument("--config", metavar="FILE", help="TOML or YAML config file")
    p.add_argument(
        "--policy",
        metavar="FILE",
        help="your moderation policy (YAML or TOML: categories, exceptions, severity scale; `vhd policy check "
        "FILE`); default: the VHD11K paper's definition and categories",
    )
    p.add_argument("--rounds", type=int, metavar="R", help="debate rounds (default 2)")
    p.add_argument(
        "--video-input",
        choices=("frames", "native"),
        help="show videos as still frames (default, the VHD11K protocol) or as one clip of their first "
        "[media] clip_seconds (native: vLLM video_url, hf models that take videos); beats the config",
    )
    p.add_argument(
        "--retry-unparsed",
        action="store_true",
        help="ask again where the judge's reply was unreadable or cut off by the token limit (a cut-off call "
        "is then asked once more with a larger token cap)",
    )
    p.add_argument(
        "--rehash",
        action="store_true",
        help="read and hash every file again (default: files with an unchanged stat are not re-read)",
    )
    p.add_argument(
        "--frame-folders", action="store_true", help="treat folders of numbered frames (<stem>_0000.png ...) as videos"
    )
    p.add_argument(
        "--include-duplicates", action="store_true", help="also annotate duplicates marked by `vhd dedup --apply`"
    )
    add_outside_flag(p)
    p.add_argument("--dry-run", action="store_true", help="count samples and estimate calls, tokens and cost")
    p.add_argument("--max-cost", type=float, metavar="USD", help="stop cleanly at this spend (needs [prices])")
    p.add_argument(
        "--stage-wise", action="store_true", help="debate stage by stage over cohorts of --concurrency samples"
    )
    p.add_argument("--strict", action="store_true", help="exit 1 when any input file was skipped")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    b = p.add_argument_group("batch API (OpenAI-compatible endpoints: half price at OpenAI, answers within 24 h)")
    b.add_argument(
        "--batch-api",
        action="store_true",
        help="send the debate's calls as batches, stage by stage; the same command resumes (batch ids in the store)",
    )
    b.add_argument(
        "--batch-poll", type=float, default=30.0, metavar="SECONDS", help="seconds between batch status checks (30)"
    )
    c = p.add_argument_group("cascade (cheap detectors first; the debate only for the uncertain samples)")
    c.add_argument(
        "--cascade",
        action="append",
        default=[],
        metavar="SPEC",
        help="a detector stage before the debate, [LABEL=]NAME[:MODEL] as `vhd bench` takes it (repeatable, in order)",
    )
    c.add_argument(
        "--cascade-thresholds",
        action="append",
        default=[],
        metavar="LOW:HIGH",
        help="per stage, same order: the stage decides when its score is below LOW or above HIGH",
    )
    c.add_argument("--cascade-calibration", metavar="FILE", help="`vhd bench --calibrate` output: calibrated scores")
    c.add_argument(
        "--cascade-set", action="append", default=[], metavar="LABEL.key=value", help="a stage detector's option"
    )
    c.add_argument("--cascade-config", metavar="FILE", help="TOML with [detectors.LABEL] option tables for the stages")
    v = p.add_argument_group("videos in time (see docs/segments.md)")
    v.add_argument(
        "--segments",
        action="store_true",
        default=None,
        help="cut every video into segments (shots, or windows) and judge each: one screen call per segment, "
        "a debate only for the flagged ones; the verdict names the harmful spans ([video] in the config)",
    )
    v.add_argument(
        "--max-calls-per-video",
        type=int,
        metavar="N",
        help="with --segments: model calls one video may spend; flagged segments past it keep their screen verdict",
    )
    add_executor_flags(p)
    p.set_defaults(handler=run)


def _fmt_summary(s: Any) -> list[str]:
    u = s.usage
    rate = s.annotated / s.elapsed_s if s.elapsed_s > 0 else 0.0
    lines = [
        f"annotated {s.annotated} sample(s) in {s.elapsed_s:.1f} s ({rate:.2f}/s): "
        f"{s.harmful} harmful, {s.unharmful} unharmful, {s.refused} decided by refusal, {s.unparsed} unparsed"
        + (f", {s.truncated} truncated" if s.truncated else ""),
        f"{s.already_done} already done, {s.errors} error(s), {s.skipped} skipped file(s), "
        f"{s.duplicates} repeated input(s), {s.excluded} excluded (removed, quarantined or marked duplicate), "
        f"{s.remaining} not attempted",
        f"{u.calls} calls, {u.prompt_tokens:,} prompt + {u.completion_tokens:,} completion tokens"
        + (f" ({u.cached_share:.0%} of prompt tokens from the endpoint's cache)" if u.cached_tokens else "")
        + (f", ${u.cost:.4f}" if u.cost else ""),
    ]
    if s.batches:
        lines.append(f"{s.batches} batch(es) created through the batch API")
    if s.segments:
        capped = f"; {s.segments_capped} flagged segment(s) left at their screen verdict by the call cap"
        lines.append(f"{s.segments} video segment(s) judged" + (capped if s.segments_capped else ""))
    if s.videos_cut_short:
        lines.append(
            f"{s.videos_cut_short} video(s) not judged to their end (the call cap or max_segments_per_video): "
            "each verdict says from where; undecided unless what was judged makes it harmful"
        )
    cascade = {k: n for k, n in s.decided_by.items() if k not in ("segments", "whole-video")}  # video protocols
    if cascade:
        stages = ", ".join(f"{label} {n}" for label, n in cascade.items())
        lines.append(f"cascade: decided by {stages}; {s.stage_calls} stage call(s)")
    if s.decided_by.get("whole-video"):
        fallen = s.decided_by["whole-video"]
        lines.append(f"{fallen} video(s) could not be segmented: judged by the whole-video protocol")
    if s.leased:
        pending = (
            f"{s.leased_unfinished} not finished there yet: run the same command again once it ends"
            if s.leased_unfinished
            else "all finished there"
        )
        lines.append(f"{s.leased} leased by another run on this store ({pending})")
    if s.rows_left_out:
        lines.append(f"{s.rows_left_out} manifest row(s) could not be read and were left out (exit 1; listed below)")
    for path, reason in s.skip_reasons[:10]:
        lines.append(f"skipped {path}: {reason}")
    if len(s.skip_reasons) > 10:
        lines.append(f"... {len(s.skip_reasons) - 10} more skipped (see the store's skips)")
    if s.truncated:
        lines.append(f"{s.truncated} sample(s) truncated: {s.budget_fix}")
    if s.errors:
        lines.append("samples with errors are retried when you run the same command again")
    for spec, e in s.local.items():
        busy = e["preprocess_s"] + e["generate_s"]
        share = f" ({e['preprocess_s'] / busy:.0%})" if busy else ""
        kind = "torchvision" if e["torchvision"] else "Pillow"
        lines.append(
            f"{spec}: {e['preprocess_s']:.1f} s preprocessing{share}, {e['generate_s']:.1f} s generating; "
            f"{e['image_processor'] or 'no'} image processor ({kind}), "
            + (
                f"{e['image_passes']} image pass(es), {e['images_reused']} reused; "
                if e["image_passes"] is not None
                else ""
            )
            + f"{e['calls']} call(s) in {e['batches']} batch(es) "
            f"of up to {e['max_batch_size']}"
        )
    for url, e in s.endpoints.items():
        lines.append(
            f"endpoint {url}: {e['requests']} request(s), {e['errors']} error(s), {e['cooldowns']} cool-down(s), "
            f"mean {e['mean_latency_s']:.3f} s, {e['prompt_tokens']:,} + {e['completion_tokens']:,} tokens"
            + (f", {e['rate_wait_s']:.1f} s waiting for rpm/tpm" if e["rate_wait_s"] else "")
        )
    lines.append(f"store: {s.store}; see one sample with `vhd show {s.store} PATH`")
    return lines


def run(args: argparse.Namespace) -> int:
    """Run the command."""
    import logging

    from vhd.annotate.api import annotate
    from vhd.annotate.options import RunOptions

    def event(message: str) -> None:  # a warning: shown unless -q, one JSON line with --log-format json
        logging.getLogger("vhd.annotate").warning("%s", message)

    cascade = None
    if args.cascade or args.cascade_thresholds or args.cascade_calibration or args.cascade_set:
        from vhd.cli.cascade_flags import cascade_from_flags

        cascade = cascade_from_flags(
            args.cascade,
            args.cascade_thresholds,
            calibration=args.cascade_calibration,
            sets=args.cascade_set,
            config=args.cascade_config,
        )
    summary = annotate(
        args.inputs,
        store=args.store,
        config=args.config,
        rounds=args.rounds,
        segments=args.segments,
        max_calls_per_video=args.max_calls_per_video,
        video_input=args.video_input,
        policy=args.policy,
        **model_overrides(args),
        options=RunOptions(
            retry_unparsed=args.retry_unparsed,
            rehash=args.rehash,
            frame_folders=args.frame_folders,
            include_duplicates=args.include_duplicates,
            allow_outside_paths=args.allow_outside_paths,
            dry_run=args.dry_run,
            max_cost=args.max_cost,
            command=shlex.join(["vhd", "annotate", *sys.argv[2:]]),
            stage_wise=args.stage_wise,
            cascade=cascade,
            batch_api=args.batch_api,
            batch_poll_s=args.batch_poll,
            executor=args.executor,
            executor_options=executor_options(args),
        ),
        progress=not args.no_progress and not args.json,
        on_event=event,
    )
    from vhd.redaction import redact_strings, redact_text

    if args.json:
        print(json.dumps(redact_strings(summary.to_dict()), indent=2, default=str))
    elif summary.dry_run and summary.estimate is not None:
        print("\n".join(_fmt_estimate(summary.estimate)))
    else:
        print("\n".join(printable(redact_text(line)) for line in _fmt_summary(summary)))
    if summary.store_error:
        print(f"vhd: error: {printable(redact_text(summary.store_error))}", file=sys.stderr)
    return summary.exit_code(strict=args.strict)


def _fmt_estimate(e: dict[str, Any]) -> list[str]:
    """The dry run's lines: one total bound for the run (calls, tokens, cost), then the segments' share."""
    seg = e.get("segments")
    if e["calls"] is None:
        calls = (
            f"at least {e['calls_min']} calls, no bound on them (set max_segments_per_video or --max-calls-per-video)"
        )
        tokens = "no bound on tokens"
    else:
        calls = f"{e['calls_min']}-{e['calls']} call{_s(e['calls'])}" + (" (--segments included)" if seg else "")
        tokens = f"at most {e['prompt_tokens_max']:,} prompt + {e['completion_tokens_max']:,} completion tokens"
    cost = "unknown (add [prices] to the config)" if e["cost_max_usd"] is None else f"at most ${e['cost_max_usd']:.2f}"
    lines = [
        f"{e['samples']} sample{_s(e['samples'])} ({e['images']} image{_s(e['images'])}, "
        f"{e['videos']} video{_s(e['videos'])}), {e['already_done']} already done, "
        f"{e['unreadable']} unreadable; {e['to_annotate']} to annotate with {calls}, {tokens}; cost {cost}"
    ]
    if seg:
        lo, hi = seg["segments"]
        screens, total = seg["screen_calls"], seg["calls"]
        most = "no bound" if hi is None else f"{hi:,}"
        cap = seg["max_calls_per_video"]
        lines.append(
            f"--segments: {seg['videos']} video{_s(seg['videos'])}, {seg['video_minutes']:g} video-minute(s) "
            f"({seg['videos_without_duration']} without a duration in their header); {lo:,}-{most} segments, "
            f"{screens[0]:,}-{'no bound' if screens[1] is None else f'{screens[1]:,}'} screen calls, "
            f"{total[0]:,}-{'no bound' if total[1] is None else f'{total[1]:,}'} calls if every segment is flagged; "
            f"at most {seg['max_segments_per_video'] or 'unbounded'} segments"
            + (f" and {cap} calls a video" if cap else " a video (no call cap)")
        )
    return lines


def _s(n: int) -> str:
    """The plural ending for a count: ``1 video``, ``2 videos``, ``0 videos``."""
    return "" if n == 1 else "s"
