"""Stage-wise debates: same verdicts as per-sample order, calls grouped by stage, cohorts, failures."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

import vhd
from vhd.annotate.options import RunOptions
from vhd.backends.base import Output
from vhd.backends.scripted import ScriptedBackend
from vhd.config import AnnotateConfig, MediaConfig
from vhd.debate.engine import Debate
from vhd.debate.prompts import Prompts
from vhd.debate.stagewise import Cohorts, StageWise, run_stagewise
from vhd.errors import BackendError
from vhd.media.discover import discover
from vhd.media.encoded import EncodedImage
from vhd.media.load import load_sample, media_settings
from vhd.records import Kind, Role
from vhd.store.sqlite import Store


def make_images(folder: Path, n: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        p = folder / f"img_{i:03d}.png"
        im = Image.new("RGB", (40, 40), ((i * 37) % 256, (i * 91) % 256, (i * 53) % 256))
        im.putpixel((i, i), (255, 255, 255))
        im.save(p)
        paths.append(p)
    return paths


def encoded(paths: Sequence[Path]) -> list[EncodedImage]:
    settings = media_settings(MediaConfig())
    items = discover([str(p) for p in paths]).items
    return [load_sample(item, settings).images[0] for item in items]


def script_for(images: Sequence[EncodedImage]) -> dict[str, Any]:
    """Answers that differ by sample: two harmful, one refused by the judge, one unparsed, the rest not."""
    h = [im.sha256[:16] for im in images] + ["not-a-hash"] * 4
    return {
        "default": "No, plain colours.",
        "rules": [
            {"when": {"tag": "affirmative", "image": h[0]}, "reply": "1. Round {round}: a red flag."},
            {"when": {"tag": "affirmative"}, "reply": "1. Round {round}: nothing much."},
            {"when": {"tag": "negative", "image": h[1]}, "reply": "I'm sorry, but I can't help with that."},
            {"when": {"tag": "negative"}, "reply": "1. Just colours in round {round}."},
            {"when": {"tag": "judge", "image": h[0]}, "reply": "Yes, a red flag.", "logprobs": {"Yes": -0.1}},
            {"when": {"tag": "judge", "image": h[2]}, "reply": "", "refused": True},
            {"when": {"tag": "judge", "image": h[3]}, "reply": "Perhaps."},
            {"when": {"tag": "judge"}, "reply": "No, plain colours.", "logprobs": {"No": -0.1, "Yes": -3.0}},
        ],
    }


def debate_with(backend: ScriptedBackend, rounds: int = 2) -> Debate:
    config = AnnotateConfig(model="scripted:demo", debate={"rounds": rounds})
    return Debate(dict.fromkeys(Role, backend), config, Prompts({}, None))


def verdicts(db_path: Path) -> dict[str, tuple[Any, ...]]:
    with Store(db_path) as db:
        return {
            Path(s.path).name: (
                a.verdict.harmful,
                a.verdict.status,
                a.verdict.reason,
                a.verdict.score,
                [(t.role, t.round, t.text, t.refused) for t in a.turns],
            )
            for s, a in db.iter_annotations()
        }


def test_stage_wise_annotation_gives_the_same_verdicts_as_per_sample_order(tmp_path: Path) -> None:
    paths = make_images(tmp_path / "media", 10)
    config = AnnotateConfig(
        model="scripted:rules", backends={"scripted": {"script": script_for(encoded(paths))}}, concurrency=4
    )
    per_sample = vhd.annotate([tmp_path / "media"], store=tmp_path / "a.db", config=config)
    staged = vhd.annotate(
        [tmp_path / "media"], store=tmp_path / "b.db", config=config, options=RunOptions(stage_wise=True)
    )
    assert per_sample.annotated == staged.annotated == 10 and staged.stage_wise and not per_sample.stage_wise
    assert (staged.harmful, staged.refused, staged.unparsed) == (3, 2, 1)  # debater and judge refusals: harmful
    assert verdicts(tmp_path / "a.db") == verdicts(tmp_path / "b.db")
    again = vhd.annotate(
        [tmp_path / "media"], store=tmp_path / "b.db", config=config, options=RunOptions(stage_wise=True)
    )
    assert again.already_done == 10 and again.usage.calls == 0  # committed per sample: resumes


def test_calls_go_stage_by_stage(tmp_path: Path) -> None:
    images = encoded(make_images(tmp_path, 5))
    backend = ScriptedBackend("rules", {"script": script_for(images)})
    debate = debate_with(backend)
    results = asyncio.run(run_stagewise(debate, [(Kind.IMAGE, [im]) for im in images]))
    tags = [tag for tag, _ in backend.calls]
    assert tags == ["affirmative"] * 5 + ["negative"] * 5 + ["affirmative"] * 5 + ["negative"] * 5 + ["judge"] * 5
    backend.calls.clear()
    one_by_one = [asyncio.run(debate.run(Kind.IMAGE, [im])) for im in images]
    assert [r.verdict for r in results] == [r.verdict for r in one_by_one]
    assert [[t.text for t in r.turns] for r in results] == [[t.text for t in r.turns] for r in one_by_one]


def test_a_caller_can_drive_the_stages_and_a_failure_ends_only_its_debate(tmp_path: Path) -> None:
    images = encoded(make_images(tmp_path, 3))
    backend = ScriptedBackend("rules", {"script": script_for(images)})
    stages = StageWise(debate_with(backend, rounds=1), [(Kind.IMAGE, [im]) for im in images])
    assert stages.stages == 3 and not stages.done
    seen = []
    while not stages.done:
        requests = stages.requests()
        seen.append([(r.index, r.call.role) for r in requests])
        replies: dict[int, Output | BackendError] = {}
        for r in requests:
            if r.index == 1 and r.call.role is Role.NEGATIVE:
                replies[1] = BackendError("endpoint down", retryable=True)
            elif r.index == 2 and r.call.role is Role.JUDGE:
                continue  # a batch API that lost one answer
            else:
                replies[r.index] = asyncio.run(r.call.backend.generate(r.call.messages, r.call.config))
        stages.accept(replies)
    assert seen == [
        [(0, Role.AFFIRMATIVE), (1, Role.AFFIRMATIVE), (2, Role.AFFIRMATIVE)],
        [(0, Role.NEGATIVE), (1, Role.NEGATIVE), (2, Role.NEGATIVE)],
        [(0, Role.JUDGE), (2, Role.JUDGE)],  # sample 1 is out after its failure
    ]
    first, second, third = stages.results()
    assert first.verdict.harmful is True and first.error is None and len(first.turns) == 3
    assert second.error == "endpoint down" and second.retryable and len(second.turns) == 1
    assert third.error is not None and "no reply" in third.error and third.retryable


def test_results_before_the_end_are_refused(tmp_path: Path) -> None:
    images = encoded(make_images(tmp_path, 1))
    stages = StageWise(debate_with(ScriptedBackend("demo")), [(Kind.IMAGE, images)])
    with pytest.raises(RuntimeError, match="stage 1 of 5"):
        stages.results()


def test_cohorts_gather_concurrent_debates_and_answer_each_caller(tmp_path: Path) -> None:
    images = encoded(make_images(tmp_path, 7))
    backend = ScriptedBackend("rules", {"script": script_for(images)})
    debate = debate_with(backend, rounds=1)

    async def main() -> tuple[list[Any], int]:
        cohorts = Cohorts(debate, size=3, wait_s=0.02)
        results = await asyncio.gather(*(cohorts.run(Kind.IMAGE, [im]) for im in images))
        await cohorts.aclose()
        return list(results), cohorts.cohorts

    results, n_cohorts = asyncio.run(main())
    assert n_cohorts == 3  # 3 + 3 + the last one, started by its timer
    first_cohort = {im.sha256 for im in images[:3]}  # cohorts overlap in time; within one, stage by stage
    tags = [tag for tag, messages in backend.calls if messages[-1].images[-1].sha256 in first_cohort]
    assert tags == ["affirmative"] * 3 + ["negative"] * 3 + ["judge"] * 3
    expected = [asyncio.run(debate.run(Kind.IMAGE, [im])).verdict for im in images]
    assert [r.verdict for r in results] == expected
