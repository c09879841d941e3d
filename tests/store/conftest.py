"""Fixtures for the store tests: a fresh store and builders for samples and annotations."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from vhd.records import Annotation, Kind, Role, Sample, Status, Turn, Usage, Verdict
from vhd.store import Store


def sample_id(n: int | str) -> str:
    return hashlib.sha256(f"sample-{n}".encode()).hexdigest()


class Builder:
    """Makes samples and annotations with predictable content."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def sample(self, n: int | str, kind: Kind = Kind.IMAGE, **kw: object) -> Sample:
        ext = "png" if kind is Kind.IMAGE else "mp4"
        fields: dict[str, object] = {"id": sample_id(n), "path": str(self.root / f"media/{n}.{ext}")}
        fields.update(kw)
        return Sample(kind=kind, **fields)  # type: ignore[arg-type]

    def turns(self, rounds: int = 2, *, judge: str = "Yes, violence.") -> list[Turn]:
        out: list[Turn] = []
        for r in range(1, rounds + 1):
            out.append(Turn(Role.AFFIRMATIVE, r, f"aff says {r}", 10, 5, 0.1, False, "scripted:a"))
            out.append(Turn(Role.NEGATIVE, r, f"neg says {r}", 11, 6, 0.2, False, "scripted:n"))
        out.append(Turn(Role.JUDGE, rounds, judge, 30, 3, 0.3, False, "scripted:j"))
        return out

    def annotation(
        self,
        sample: Sample,
        run_id: str,
        *,
        config_hash: str = "cfgA",
        status: Status = Status.OK,
        harmful: bool | None = True,
        reason: str = "violence",
        categories: list[str] | None = None,
        turns: list[Turn] | None = None,
        error: str | None = None,
        score: float | None = 0.75,
    ) -> Annotation:
        return Annotation(
            sample_id=sample.id,
            run_id=run_id,
            config_hash=config_hash,
            verdict=Verdict(
                harmful=harmful,
                reason=reason,
                categories=list(categories or []),
                score=score,
                status=status,
                refused=status is Status.REFUSED,
            ),
            turns=self.turns() if turns is None else turns,
            usage=Usage(calls=5, prompt_tokens=100, completion_tokens=40, cost=0.01),
            error=error,
            started_at=1000.0,
            finished_at=1001.5,
        )


@pytest.fixture
def build(tmp_path: Path) -> Builder:
    return Builder(tmp_path)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "vhd.db", create=True) as s:
        yield s


@pytest.fixture
def run_id(store: Store) -> str:
    return store.start_run({"rounds": 2}, "cfgA", {"judge": "scripted:j"}, "p1", "vhd annotate x")
