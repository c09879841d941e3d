"""Does ``vhd annotate --segments`` find planted events in time, at what cost and memory? Before vs after.

Drawn videos (`vhd.demo.PlantedVideo`) carry a planted visible event (a large red disk) during
known spans, and background cuts at other known times. A loopback OpenAI-compatible server
(stdlib ``http.server`` on 127.0.0.1, Nagle off) answers "harmful" exactly when the red disk is
visible in any image it is sent, so the models see what the protocol shows them and nothing else.
The real ``vhd annotate`` runs against it:

- **before**: today's VHD11K protocol (5 frames of the first 4,000, one verdict): which event
  videos it misses, and false positives;
- **after**: ``--segments``: segment-level F1 at IoU >= 0.5 and the median boundary error
  (`vhd.bench.metrics.segments.SegmentMetrics`), video-level recall and false positives;
- **long video**: a 10-minute video with two events (both after the first 400 s, so past the
  first 4,000 frames at 10 fps), annotated with ``--segments`` in a child process: peak RSS
  (its own ``ru_maxrss``, from ``wait4``) and whether both events were found;
- **cost**: calls per video-minute with the screen (measured) and with a full debate of every
  segment (segments x the calls of a debate).

``--long-only --long-repeats N`` measures only the 10-minute video, N times on the one file (a
fresh store each), with the child's wall time, CPU time (user + system, from ``wait4``; steadier
than wall time on a shared machine) and peak RSS each time: for comparing two versions of vhd
(run it once with each on ``PYTHONPATH``). It also times, in this process, the two reads a
segmented video may get: the whole-video protocol's five frames (`vhd.media.load.load_sample`,
best of 3) and the segment pass (`vhd.media.segments.iter_segments`). ``--long-keyframes first``
re-encodes the long video with a keyframe only at its start (x264 ``g`` and ``sc_threshold``), the
worst case for the five-frame reader, which then cannot seek and decodes forward.

Usage:
    python benchmarks/segments_quality.py --videos 16 --out segments.json
    python benchmarks/segments_quality.py --long-only --long-repeats 3

Targets (issue 31): segment F1 >= 0.9, median boundary error <= 1 s, video-level recall 1.0 with
no false positive, the 10-minute video under 400 MB peak RSS.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROUNDS = 2
DEBATE_CALLS = 2 * ROUNDS + 1


def _sees_red(body: dict[str, Any]) -> bool:
    from PIL import Image

    from vhd.demo import red_visible

    for message in body.get("messages", []):
        content = message.get("content")
        for part in content if isinstance(content, list) else []:
            if part.get("type") == "image_url":
                data = part["image_url"]["url"].split(",", 1)[1]
                if red_visible(Image.open(io.BytesIO(base64.b64decode(data)))):
                    return True
    return False


class Handler(BaseHTTPRequestHandler):
    """``POST /v1/chat/completions``: harmful exactly when the red event is in a frame sent."""

    disable_nagle_algorithm = True
    protocol_version = "HTTP/1.1"
    calls = 0
    lock = threading.Lock()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send({"object": "list", "data": [{"id": "m", "object": "model"}]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        with Handler.lock:
            Handler.calls += 1
        system = body["messages"][0]["content"]
        system = system if isinstance(system, str) else " ".join(p.get("text", "") for p in system)
        red = _sees_red(body)
        if "judge" in system:
            text = "Yes, a red disk." if red else "No, plain colours."
        else:
            text = "1. A red disk is shown." if red else "1. Only plain colours."
        self._send(
            {
                "id": "x",
                "object": "chat.completion",
                "model": body.get("model", "m"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 100, "completion_tokens": len(text.split())},
            }
        )


def serve() -> tuple[ThreadingHTTPServer, str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"


def plan_videos(n: int, seed: int) -> list[tuple[str, Any]]:
    """``n`` videos of 20-90 s: two thirds with one or two events at random times, the rest clean."""
    from vhd.demo import PlantedVideo

    rng = random.Random(seed)
    out = []
    for k in range(n):
        duration = float(rng.randint(20, 90))
        cuts, t = [], 0.0
        while True:
            t += rng.uniform(4.0, 20.0)
            if t >= duration - 1:
                break
            cuts.append(round(t, 1))
        events = []
        if k % 3 != 2:
            for _ in range(rng.choice((1, 2))):
                length = rng.uniform(3.0, 10.0)
                start = round(rng.uniform(1.0, duration - length - 1), 1)
                span = (start, round(start + length, 1))
                if all(span[0] > e[1] + 2 or span[1] < e[0] - 2 for e in events):
                    events.append(span)
        out.append((f"v{k:02d}.mp4", PlantedVideo(duration, tuple(sorted(events)), tuple(cuts), fps=10)))
    return out


def config_file(folder: Path, base_url: str, segments: bool) -> Path:
    path = folder / f"config_{'seg' if segments else 'whole'}.toml"
    path.write_text(
        f'[backends.openai]\nbase_url = "{base_url}"\n[debate]\nrounds = {ROUNDS}\njudge_logprobs = false\n'
        f"[video]\nsegments = {'true' if segments else 'false'}\n"
    )
    return path


def annotate_set(
    folder: Path, media: Path, base_url: str, segments: bool, name: str = "set"
) -> tuple[dict[str, Any], dict[str, Any]]:
    import vhd
    from vhd.store.sqlite import Store

    db = folder / f"{name}_{'seg' if segments else 'whole'}.db"
    Handler.calls = 0
    start = time.perf_counter()
    summary = vhd.annotate(
        [media], config=config_file(folder, base_url, segments), store=db, model="openai:m", progress=False
    )
    elapsed = time.perf_counter() - start
    with Store(db) as store:
        verdicts = {Path(s.path).name: a.verdict for s, a in store.iter_annotations(summary.config_hash)}
    return verdicts, {"calls": Handler.calls, "wall_s": round(elapsed, 2), "segments": summary.segments}


def _reencode_one_keyframe(source: Path, target: Path) -> None:
    """``source`` re-encoded as H.264 with a keyframe only at the start (same frames and timestamps)."""
    import av

    with av.open(str(source)) as src, av.open(str(target), mode="w", format="mp4") as dst:
        ins = src.streams.video[0]
        out = dst.add_stream("libx264", rate=ins.average_rate)
        out.width, out.height, out.pix_fmt, out.time_base = ins.width, ins.height, "yuv420p", ins.time_base
        out.codec_context.options = {"crf": "20", "preset": "veryfast", "threads": "1", "g": "1000000"}
        out.codec_context.options |= {"sc_threshold": "0", "keyint_min": "1000000"}
        for frame in src.decode(ins):
            frame.pict_type = av.video.frame.PictureType.NONE
            dst.mux(out.encode(frame))
        dst.mux(out.encode())


def _keyframes(path: Path) -> int:
    import av

    with av.open(str(path)) as container:
        return sum(1 for p in container.demux(container.streams.video[0]) if p.is_keyframe)


def _reads(path: Path) -> dict[str, float]:
    """Seconds of the five-frame read (best of 3) and of one segment pass, in this process."""
    from vhd.media.load import load_sample
    from vhd.media.segments import iter_segments
    from vhd.records import Kind, MediaItem

    item = MediaItem(path=path, kind=Kind.VIDEO)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        load_sample(item)
        best = min(best, time.perf_counter() - start)
    start = time.perf_counter()
    for _ in iter_segments(path):
        pass
    return {"five_frame_read_s": round(best, 2), "segment_pass_s": round(time.perf_counter() - start, 2)}


def long_video_run(
    folder: Path,
    base_url: str,
    minutes: float,
    size: tuple[int, int],
    repeats: int = 1,
    keyframes: str = "default",
) -> dict[str, Any]:
    from vhd.demo import PlantedVideo, write_event_video

    events = ((430.0, 440.0), (520.0, 528.0))
    cuts = tuple(float(t) for t in range(15, int(minutes * 60), 15))
    video = PlantedVideo(minutes * 60, events, cuts, fps=10, size=size)
    media = folder / "long"
    media.mkdir()
    start = time.perf_counter()
    write_event_video(media / "long.mp4", video)
    if keyframes == "first":
        _reencode_one_keyframe(media / "long.mp4", folder / "one_keyframe.mp4")
        (folder / "one_keyframe.mp4").replace(media / "long.mp4")
    written = time.perf_counter() - start
    reads = {"keyframes": _keyframes(media / "long.mp4"), **_reads(media / "long.mp4")}
    runs = [_long_annotate(folder / f"long{k}.db", media, base_url, events) for k in range(repeats)]
    return {
        "minutes": minutes,
        "frames": video.frame_count,
        "size": list(size),
        "events": [list(e) for e in events],
        "encode_s": round(written, 1),
        **reads,
        **runs[0],
        "runs": [{k: r[k] for k in ("wall_s", "cpu_s", "peak_rss_mb")} for r in runs],
    }


def _long_annotate(db: Path, media: Path, base_url: str, events: tuple[tuple[float, float], ...]) -> dict[str, Any]:
    """``vhd annotate --segments`` on the long video in a child process: what it found, its time and RSS."""
    folder = db.parent
    cmd = [sys.executable, "-m", "vhd", "annotate", str(media), "--model", "openai:m", "--store", str(db),
           "--config", str(config_file(folder, base_url, True)), "--no-progress", "--json"]  # fmt: skip
    Handler.calls = 0
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = proc.stdout.read() if proc.stdout else b""
    err = proc.stderr.read() if proc.stderr else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    from vhd.store.sqlite import Store

    summary = json.loads(out) if out.strip() else {}
    with Store(db) as store:
        ann = next(iter(store.iter_annotations()))[1]
    from vhd.bench.metrics.segments import merge_spans

    found = merge_spans([(s.start_s, s.end_s) for s in ann.verdict.segments if s.harmful])  # touching spans: one
    return {
        "harmful_spans_found": found,
        "both_found": all(any(a <= e0 + 1 and b >= e1 - 1 for a, b in found) for e0, e1 in events),
        "segments": len(ann.verdict.segments),
        "calls": Handler.calls,
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "wall_s": round(wall, 1),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
        "exit": os.waitstatus_to_exitcode(status),
        "stderr_tail": err.decode()[-500:] if status else "",
        "summary_calls": summary.get("usage", {}).get("calls"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--videos", type=int, default=18, help="videos in the planted set (two thirds with events)")
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--long-minutes", type=float, default=10.0)
    parser.add_argument("--long-size", default="320x240", help="frame size of the long video")
    parser.add_argument("--skip-long", action="store_true")
    parser.add_argument("--long-only", action="store_true", help="only the 10-minute video (no planted set)")
    parser.add_argument("--long-repeats", type=int, default=1, help="segmented runs of the long video")
    parser.add_argument("--long-keyframes", choices=("default", "first"), default="default")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    from vhd.bench.metrics.segments import BOUNDARY_ERROR, SegmentMetrics
    from vhd.demo import write_event_video

    server, base_url = serve()
    result: dict[str, Any] = {"rounds": ROUNDS, "debate_calls": DEBATE_CALLS}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if not args.skip_long:  # first, while this process is small
            w, h = (int(x) for x in args.long_size.split("x"))
            result["long"] = long_video_run(
                folder, base_url, args.long_minutes, (w, h), args.long_repeats, args.long_keyframes
            )
            whole, cost = annotate_set(folder, folder / "long", base_url, segments=False, name="long")
            result["long"]["before"] = {"harmful": whole["long.mp4"].harmful, "calls": cost["calls"]}
            print(json.dumps({"long": result["long"]}), flush=True)
        if args.long_only:
            server.shutdown()
            if args.out:
                args.out.write_text(json.dumps(result, indent=2) + "\n")
            return
        media = folder / "set"
        media.mkdir()
        planned = plan_videos(args.videos, args.seed)
        for name, video in planned:
            write_event_video(media / name, video)
        truth = dict(planned)
        minutes = sum(v.duration_s for v in truth.values()) / 60
        with_events = [n for n, v in truth.items() if v.events]
        before, before_cost = annotate_set(folder, media, base_url, segments=False)
        after, after_cost = annotate_set(folder, media, base_url, segments=True)
    server.shutdown()

    def video_level(verdicts: dict[str, Any]) -> dict[str, Any]:
        missed = [n for n in with_events if verdicts[n].harmful is not True]
        false_pos = [n for n, v in truth.items() if not v.events and verdicts[n].harmful is True]
        return {
            "recall": round(1 - len(missed) / len(with_events), 3),
            "missed": missed,
            "false_positives": false_pos,
        }

    metrics = SegmentMetrics(resamples=1000)
    for name, video in truth.items():
        metrics.update(list(video.events), after[name].segments)
    seg = metrics.compute()
    values = {k: v.to_dict() for k, v in seg.values.items()}
    segments = after_cost["segments"]
    result.update(
        {
            "videos": len(truth),
            "with_events": len(with_events),
            "video_minutes": round(minutes, 2),
            "before": {
                **video_level(before),
                **before_cost,
                "calls_per_minute": round(before_cost["calls"] / minutes, 2),
            },
            "after": {
                **video_level(after),
                **after_cost,
                "segment_f1": values["segment_f1"],
                "segment_precision": values["segment_precision"],
                "segment_recall": values["segment_recall"],
                "duration_f1": values["duration_f1"],
                "median_boundary_error_s": values[BOUNDARY_ERROR],
                "true_spans": seg.n_true,
                "predicted_spans": seg.n_pred,
                "matched": seg.matched,
                "calls_per_minute_screened": round(after_cost["calls"] / minutes, 2),
                "calls_per_minute_full_debate_per_segment": round(segments * DEBATE_CALLS / minutes, 2),
            },
        }
    )
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
