"""Fixtures for the taxonomy tests: a store of annotations with known reasons, and the packaged MiniLM."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from vhd.records import Annotation, Kind, Role, Sample, Status, Turn, Usage, Verdict
from vhd.store import Store

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the embedding tests must never reach a hub

DATA = Path(__file__).parent / "data"
LABELLED = DATA / "category_reasons.csv"


@dataclass(frozen=True)
class Spec:
    """One planted annotation: what the judge said, and what is known about the sample."""

    name: str
    reason: str
    harmful: bool | None = True
    status: Status = Status.OK
    kind: Kind = Kind.IMAGE
    source: str | None = "real"
    keyword: str | None = None
    argument: str = ""


SPECS = [
    Spec("nude", "adult content and nudity", kind=Kind.IMAGE, source="real", keyword="nudity",
         argument="The picture shows a naked person in a sexual pose."),
    Spec("blood", "bloody violent scene", kind=Kind.IMAGE, source="synthetic", keyword="bloody",
         argument="A man is bleeding heavily from a stab wound."),
    Spec("drugs", "drug use with a syringe", kind=Kind.VIDEO, source="real", keyword="injectables",
         argument="The frames show someone injecting heroin."),
    Spec("nazi", "nazi hate symbol", kind=Kind.VIDEO, source="synthetic", keyword="nazi",
         argument="A swastika flag is displayed prominently."),
    Spec("dog", "animal cruelty", kind=Kind.IMAGE, source="synthetic", keyword="animal abuse",
         argument="A dog is being beaten with a stick."),
    Spec("calm", "kitchen scene", harmful=False, keyword="culinary knife in hand"),
    Spec("toy", "ordinary toy", harmful=False, kind=Kind.VIDEO, source="synthetic", keyword="toy"),
    Spec("refusal", "refusal by the judge", status=Status.REFUSED, source="real", keyword="nudity"),
    Spec("unread", "", harmful=None, status=Status.UNPARSED, keyword="bloody"),
    Spec("broken", "", harmful=None, status=Status.ERROR, keyword="bloody"),
]  # fmt: skip
"""Five harmful with clear reasons, two unharmful, one refusal, one unparsed, one error."""


def sample_id(name: str) -> str:
    return hashlib.sha256(f"taxonomy-{name}".encode()).hexdigest()


def make_annotation(spec: Spec, run_id: str, config_hash: str = "cfg1") -> tuple[Sample, Annotation]:
    ext = "png" if spec.kind is Kind.IMAGE else "mp4"
    sample = Sample(
        id=sample_id(spec.name),
        kind=spec.kind,
        path=f"/data/{spec.name}.{ext}",
        source=spec.source,
        keyword=spec.keyword,
    )
    turns = [
        Turn(Role.AFFIRMATIVE, 1, spec.argument or "It could upset someone.", model="scripted:a"),
        Turn(Role.NEGATIVE, 1, "Nothing here is clearly harmful.", model="scripted:n"),
        Turn(Role.JUDGE, 1, f"Yes, {spec.reason}." if spec.harmful else f"No, {spec.reason}.", model="scripted:j"),
    ]
    verdict = Verdict(
        harmful=spec.harmful,
        reason=spec.reason,
        status=spec.status,
        refused=spec.status is Status.REFUSED,
    )
    ann = Annotation(
        sample_id=sample.id,
        run_id=run_id,
        config_hash=config_hash,
        verdict=verdict,
        turns=turns,
        usage=Usage(calls=3),
        error="boom" if spec.status is Status.ERROR else None,
        started_at=1.0,
        finished_at=2.0,
    )
    return sample, ann


def fill_store(store: Store, specs: list[Spec] = SPECS) -> str:
    run_id = store.start_run({}, "cfg1", {"judge": "scripted:j"}, "p")
    for spec in specs:
        sample, ann = make_annotation(spec, run_id)
        store.save_annotation(ann, sample)
    return run_id


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "run.db"
    with Store(path) as store:
        fill_store(store)
    return path


@pytest.fixture
def store(store_path: Path) -> Iterator[Store]:
    with Store(store_path) as s:
        yield s


@pytest.fixture(scope="session")
def embedder() -> Any:
    """The packaged all-MiniLM-L6-v2, loaded once, strictly offline."""
    from vhd.categorize.embedding import load_embedder

    return load_embedder()
