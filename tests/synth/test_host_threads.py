"""`vhd generate`'s host work off the pipeline thread: spread over host threads, the same bytes, in order.

The pipeline is a small stand-in (no diffusers): it returns float frames as diffusers'
``output_type="np"`` does, so these tests exercise vhd's own conversion, watermark, encoding,
signing, hashing and commits.
"""

from __future__ import annotations

import threading
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.optional import need_module
from vhd.store.sqlite import Store
from vhd.synth.generate import generate, generate_batch
from vhd.synth.generators import Frames, GenerateSettings, Generator, create_generator
from vhd.synth.provenance import read_embedded
from vhd.synth.rows import read_prompt_csv

SIZE = 256  # the watermark applies from 256 px on


class FloatPipe:
    """Returns one distinct float image per prompt (a function of the prompt text), as diffusers does."""

    def __init__(self) -> None:
        self.scheduler = types.SimpleNamespace()
        self.threads: list[str] = []

    def set_progress_bar_config(self, **kwargs: Any) -> None:
        pass

    def __call__(self, prompt: list[str], width: int = SIZE, height: int = SIZE, **kwargs: Any) -> Any:
        self.threads.append(threading.current_thread().name)
        images = []
        for text in prompt:
            rng = np.random.default_rng(sum(map(ord, text)))
            base = np.linspace(0.0, 1.0, width * height * 3, dtype=np.float32).reshape(height, width, 3)
            images.append((0.7 * base + 0.3 * rng.random((height, width, 3), dtype=np.float32)).astype(np.float32))
        return types.SimpleNamespace(images=np.stack(images))


def standin(batch_size: int = 4, **changes: Any) -> Generator:
    settings = GenerateSettings(device="cpu", size=(SIZE, SIZE), steps=2, batch_size=batch_size, **changes)
    gen = create_generator("sdxl:standin-model", settings)
    gen.pipe, gen.device, gen.dtype = FloatPipe(), "cpu", "float32"
    return gen


def prompts(tmp_path: Path, n: int) -> Path:
    path = tmp_path / "p.csv"
    path.write_text("prompt,keyword\n" + "".join(f"a street scene number {i},street\n" for i in range(n)))
    return path


def test_outputs_are_those_of_a_serial_run_in_prompt_order(tmp_path: Path) -> None:
    need_module("imwatermark", "pip install 'vhd[watermark]'")
    csv = prompts(tmp_path, 7)
    gen = standin(batch_size=3)  # the watermark on, Content Credentials as installed: the defaults
    with Store(tmp_path / "run.db") as store:
        result = generate(csv, gen, tmp_path / "out", store=store)
    assert len(result.samples) == 7 and not result.failed
    rows, _ = read_prompt_csv(csv)
    # the order of commits is the prompt order
    assert [read_embedded(p).prompt_id for p in result.written] == [r.id for r in rows]  # type: ignore[union-attr]
    # the same files as the serial path (one thread: the pipeline, then each output in turn)
    serial = standin(batch_size=3)
    made = [g for k in range(0, 7, 3) for g in generate_batch(serial, rows[k : k + 3])]
    if read_embedded(result.written[0]).content_credentials == "off":  # type: ignore[union-attr]
        assert [Path(p).read_bytes() for p in result.written] == [g.data for g in made]
    else:  # a C2PA signature carries a time: compare the pixels and the provenance instead
        from PIL import Image

        for path, g in zip(result.written, made, strict=True):
            with Image.open(path) as im:
                assert np.array_equal(np.asarray(im.convert("RGB")), g.frames[0])
            assert read_embedded(path).to_dict() == g.provenance.to_dict()  # type: ignore[union-attr]
    # the pipeline thread only ran the pipeline: never the calling thread
    assert set(gen.pipe.threads) == {n for n in gen.pipe.threads if n.startswith("vhd-pipeline")}


def test_the_outputs_of_a_batch_are_finished_on_several_threads_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import vhd.synth.overlap as overlap

    real = overlap.finish_one
    both = threading.Barrier(2, timeout=20)  # passes only when two outputs are being finished together
    names: set[str] = set()

    def finish_one(*args: Any, **kwargs: Any) -> Any:
        names.add(threading.current_thread().name)
        both.wait()
        return real(*args, **kwargs)

    monkeypatch.setattr(overlap, "finish_one", finish_one)
    monkeypatch.setattr(overlap, "HOST_THREADS", 2)
    gen = standin(batch_size=4, watermark=False, content_credentials="off")
    result = generate(prompts(tmp_path, 4), gen, tmp_path / "out")  # one batch: the last, which nothing follows
    assert len(result.written) == 4 and len(names) == 2 and all(n.startswith("vhd-host") for n in names)


def test_float_frames_become_uint8_on_the_host_and_all_black_is_blacked_out() -> None:
    frames = np.array([[[[0.0, 0.5, 1.0]]]], dtype=np.float32)
    done = Frames(frames).as_uint8()
    assert done.frames.dtype == np.uint8 and done.frames.tolist() == [[[[0, 128, 255]]]] and not done.blacked_out
    assert Frames(np.zeros((1, 2, 2, 3), dtype=np.float32)).as_uint8().blacked_out
    assert Frames(np.full((1, 2, 2, 3), 0.5, dtype=np.float32), blacked_out=True).as_uint8().blacked_out
    same = Frames(np.zeros((1, 2, 2, 3), dtype=np.uint8))  # uint8 from a plugin: kept as it is
    assert same.as_uint8() is same and not same.blacked_out


def test_the_watermark_is_the_libraries_own_pixels() -> None:
    need_module("imwatermark", "pip install 'vhd[watermark]'")
    from imwatermark import WatermarkEncoder
    from skimage import data

    from vhd.synth.outputs import WATERMARK_MESSAGE, Watermarker

    bits = [int(b) for b in bin(WATERMARK_MESSAGE)[2:]]
    library = WatermarkEncoder()
    library.set_watermark("bits", bits)
    rng = np.random.default_rng(5)
    frames = [
        np.ascontiguousarray(data.astronaut()),  # a photo
        rng.integers(0, 256, (300, 517, 3), dtype=np.uint8),  # noise, sides not multiples of 8
        np.zeros((256, 256, 3), dtype=np.uint8),  # flat: every block's largest coefficient is a tie
        np.full((262, 270, 3), 255, dtype=np.uint8),  # saturated: the inverse DWT wraps as the library's does
    ]
    for frame in frames:
        want = library.encode(np.ascontiguousarray(frame[:, :, ::-1]), "dwtDct")[:, :, ::-1]
        assert np.array_equal(Watermarker().apply(frame[None])[0], want)


def _nice_of(tid: int) -> int:
    import os

    return os.getpriority(os.PRIO_PROCESS, tid)


LINUX_ONLY = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="per-thread nice is Linux's")


@LINUX_ONLY
def test_only_the_host_threads_run_at_a_lower_os_priority(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import vhd.synth.overlap as overlap
    from vhd.synth.batch import finish_one as real

    seen: dict[str, int] = {}

    def finish_one(*args: Any, **kwargs: Any) -> Any:
        seen[threading.current_thread().name] = _nice_of(threading.get_native_id())
        return real(*args, **kwargs)

    class NicePipe(FloatPipe):
        def __call__(self, prompt: list[str], width: int = SIZE, height: int = SIZE, **kwargs: Any) -> Any:
            seen[threading.current_thread().name] = _nice_of(threading.get_native_id())
            return super().__call__(prompt, width, height, **kwargs)

    monkeypatch.setattr(overlap, "finish_one", finish_one)
    monkeypatch.setattr(overlap, "HOST_THREADS", 2)
    monkeypatch.setattr(overlap, "HOST_NICE", 10, raising=False)
    base = _nice_of(threading.get_native_id())
    gen = standin(batch_size=2)  # the watermark and Content Credentials as `vhd generate` has them
    gen.pipe = NicePipe()
    result = generate(prompts(tmp_path, 6), gen, tmp_path / "out")
    assert len(result.written) == 6 and _nice_of(threading.get_native_id()) == base
    hosts = {name: nice for name, nice in seen.items() if name.startswith("vhd-host")}
    pipeline = {name: nice for name, nice in seen.items() if name.startswith("vhd-pipeline")}
    assert hosts and pipeline and len(seen) == len(hosts) + len(pipeline)
    assert set(hosts.values()) == {min(19, base + 10)} and set(pipeline.values()) == {base}


LEFT_BEHIND = """
import json, os, sys, tempfile
from pathlib import Path
import tests.synth.test_host_threads as t
from vhd.synth.generate import generate

t.SIZE = 512  # OpenCV's colour conversion runs in parallel from here on: its pool starts in this run
with tempfile.TemporaryDirectory() as tmp:
    written = generate(t.prompts(Path(tmp), 4), t.standin(batch_size=2), Path(tmp) / "out").written
nice = {task.name: os.getpriority(os.PRIO_PROCESS, int(task.name)) for task in Path("/proc/self/task").iterdir()}
print(json.dumps({"written": len(written), "base": os.getpriority(os.PRIO_PROCESS, 0), "threads": nice}))
"""


@pytest.mark.slow
@LINUX_ONLY
def test_no_thread_is_left_behind_at_the_host_threads_priority() -> None:
    import json
    import os
    import subprocess
    import sys

    need_module("imwatermark", "pip install 'vhd[watermark]'")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run(
        [sys.executable, "-c", LEFT_BEHIND], env=env, capture_output=True, text=True, timeout=240, check=False
    )  # a fresh interpreter: no library has started its threads yet
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["written"] == 4
    # every thread still alive after the run (the host threads are gone) keeps the process's nice
    assert set(report["threads"].values()) == {report["base"]}, report


def test_lower_priority_changes_nothing_where_it_does_not_apply(monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import sys

    import vhd.synth.overlap as overlap

    calls: list[tuple[int, ...]] = []
    monkeypatch.setattr(os, "setpriority", lambda *a: calls.append(a))
    overlap.lower_priority(0)  # nice 0: not asked
    monkeypatch.setattr(sys, "platform", "darwin")  # a thread id is no process id there
    overlap.lower_priority(10)
    assert calls == []

    def refused(*args: int) -> None:
        raise PermissionError("setpriority not allowed here")

    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(os, "setpriority", refused)
    monkeypatch.setattr(os, "getpriority", lambda *a: 0)
    overlap.lower_priority(10)  # a sandbox that refuses: the thread goes on at its priority
