"""What changes when the policy does: annotate the same samples under two policies and list the flips.

``vhd policy diff A B INPUTS... --model M`` is a policy regression test a team runs before it
adopts a new version: `policy_diff` annotates the inputs under policy A, then under policy B
(`vhd.annotate.annotate_async`, into one store), and reports every sample whose decision, policy
category or severity level differs, with both judges' reasons.

Work is reused wherever the two share it:

- **Calls.** While the two runs go, `vhd.compare.shared_calls.SharedCalls` answers each request
  identical to an earlier one (same backend, decoding settings and messages) with the earlier
  answer. Policy texts never name the policy or its version, so a version that only renames the
  policy or changes its severity scale (which only the judge reads) sends no new debater call,
  and B's judge reads exactly the arguments A's judge read.
- **The store.** Each policy's annotations are kept under its configuration hash (the policy's
  content hash is part of it). A diff run again, or after ``vhd annotate --policy A``, with the
  same ``--store``, asks nothing for a sample that already has a final verdict under a policy.

A verdict's *category* is the policy category the judge's reason names (by id, name or code,
`vhd.taxonomy.answer.parse_answer` over `vhd.policy.Policy.to_taxonomy`), reported by its id;
its *decision* is harmful, unharmful or none (unparsed, refused without a decision, failed).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vhd.errors import ConfigError

if TYPE_CHECKING:
    from vhd.annotate.api import Inputs
    from vhd.annotate.options import RunOptions
    from vhd.annotate.summary import RunSummary
    from vhd.config import AnnotateConfig
    from vhd.policy import Policy
    from vhd.records import Annotation
    from vhd.store.sqlite import Store

CHANGES = ("decision", "category", "severity")
"""What a flip may change, in the order reports name them."""

_PAGE = 512


@dataclass(frozen=True)
class Side:
    """One sample's verdict under one policy, as a diff shows it.

    Attributes:
        harmful: The decision; None when there is none (unparsed, failed, not annotated).
        category: The id of the policy category the judge's reason names, when harmful and named.
        severity: The severity level the judge gave, when harmful under a policy with a scale.
        reason: The judge's short reason (or why there is no decision).
        status: The verdict's status (``ok``, ``unparsed``, ``refused``, ``error``, ...; ``missing``
            when the sample has no annotation under this policy).
    """

    harmful: bool | None
    category: str | None
    severity: str | None
    reason: str
    status: str

    def to_dict(self) -> dict[str, Any]:
        """Plain data."""
        return {
            "harmful": self.harmful,
            "category": self.category,
            "severity": self.severity,
            "reason": self.reason,
            "status": self.status,
        }


@dataclass(frozen=True)
class Flip:
    """A sample whose verdict differs between the two policies.

    Attributes:
        sample_id: The sample's content hash.
        path: Its media path.
        changes: What differs (`CHANGES`, in that order).
        a: Its verdict under policy A.
        b: Its verdict under policy B.
    """

    sample_id: str
    path: str
    changes: tuple[str, ...]
    a: Side
    b: Side

    def to_dict(self) -> dict[str, Any]:
        """Plain data."""
        return {
            "sample_id": self.sample_id,
            "path": self.path,
            "changes": list(self.changes),
            "a": self.a.to_dict(),
            "b": self.b.to_dict(),
        }


@dataclass
class PolicyDiff:
    """The result of `policy_diff`.

    Attributes:
        policy_a: Policy A's ``name@version``.
        policy_b: Policy B's ``name@version``.
        config_hash_a: The configuration hash A's verdicts are stored under.
        config_hash_b: The same for B.
        compared: Samples of the inputs compared.
        samples: The flips, in the order the inputs give the samples.
        calls_made: Model calls sent in this diff.
        calls_shared: Calls answered with an identical earlier call's answer (not sent again).
        store: The store holding both policies' annotations (None: a temporary one, removed).
        summaries: The two runs' summaries (A, then B).
    """

    policy_a: str
    policy_b: str
    config_hash_a: str
    config_hash_b: str
    compared: int
    samples: list[Flip] = field(default_factory=list)
    calls_made: int = 0
    calls_shared: int = 0
    store: str | None = None
    summaries: list[RunSummary] = field(default_factory=list)

    @property
    def flips(self) -> int:
        """Samples whose decision, category or severity changed."""
        return len(self.samples)

    def to_dict(self) -> dict[str, Any]:
        """``{"flips": N, "samples": [...]}`` and the figures behind them."""
        return {
            "flips": self.flips,
            "samples": [f.to_dict() for f in self.samples],
            "policy_a": self.policy_a,
            "policy_b": self.policy_b,
            "config_hash_a": self.config_hash_a,
            "config_hash_b": self.config_hash_b,
            "compared": self.compared,
            "calls": {"made": self.calls_made, "shared": self.calls_shared},
            "store": self.store,
        }


def _policy_arg(value: str | os.PathLike[str] | Policy | None) -> str | None:
    """One side's policy as the configuration's ``policy`` (an absolute path; None: the packaged default)."""
    from vhd.policy import DEFAULT_POLICY, Policy

    if isinstance(value, Policy):
        raise ConfigError("policy_diff takes policy files (paths), not Policy objects: save the policy first")
    if value is None or os.fspath(value) == DEFAULT_POLICY:
        return None
    return str(Path(value).expanduser().resolve())


def side_of(annotation: Annotation | None, policy: Policy) -> Side:
    """How a diff shows a sample's annotation under ``policy`` (``missing`` without one)."""
    if annotation is None:
        return Side(None, None, None, "no annotation under this policy", "missing")
    verdict = annotation.verdict
    reason = verdict.reason if verdict.harmful is not None else (verdict.reason or annotation.error or "")
    category = category_of(verdict.reason, policy) if verdict.harmful else None
    return Side(verdict.harmful, category, verdict.severity, reason, verdict.status.value)


def category_of(reason: str, policy: Policy) -> str | None:
    """The id of the policy category a judge's reason names (by id, name or code), or None."""
    from vhd.taxonomy.answer import parse_answer

    text = (reason or "").strip().rstrip(".")
    if not text:
        return None
    by_id = {c.id.lower(): c.id for c in policy.categories}
    if text.lower() in by_id:
        return by_id[text.lower()]
    taxonomy = policy.to_taxonomy()
    ids = dict(zip(policy.codes(), (c.id for c in policy.categories), strict=True))
    found = taxonomy.find(text)
    if found is not None and found.code in ids:
        return ids[found.code]
    codes = [c for c in parse_answer(text, taxonomy).codes if c in ids]
    return ids[codes[0]] if codes else None


def changes(a: Side, b: Side) -> tuple[str, ...]:
    """What differs between two sides of a sample (`CHANGES` order)."""
    out: list[str] = []
    if a.harmful != b.harmful:
        out.append("decision")
    if a.harmful and b.harmful and a.category != b.category:
        out.append("category")
    if a.harmful and b.harmful and a.severity != b.severity:
        out.append("severity")
    return tuple(out)


def _sample_ids(inputs: Inputs, frame_folders: bool, allow_outside_paths: bool) -> Iterator[str]:
    """The content ids of the inputs' samples, as annotate finds them (unreadable ones left out)."""
    from vhd.annotate.api import input_list
    from vhd.errors import MediaError
    from vhd.media.discover import iter_discover
    from vhd.media.load import sample_id
    from vhd.records import MediaItem

    seen: set[str] = set()
    for found in iter_discover(
        input_list(inputs), frame_folders=frame_folders, allow_outside_paths=allow_outside_paths
    ):
        if not isinstance(found, MediaItem):
            continue
        try:
            sid = found.id if found.id and len(found.id) == 64 else sample_id(found)
        except (MediaError, OSError):
            continue
        if sid not in seen:
            seen.add(sid)
            yield sid


def compare_stored(
    db: Store, ids: Sequence[str], hash_a: str, hash_b: str, policy_a: Policy, policy_b: Policy
) -> Iterator[Flip]:
    """The flips among ``ids`` between the annotations stored under two configuration hashes."""
    for start in range(0, len(ids), _PAGE):
        page = list(ids[start : start + _PAGE])
        under_a = db.annotations_for(page, hash_a)
        under_b = db.annotations_for(page, hash_b)
        for sid in page:
            a = side_of(under_a.get(sid), policy_a)
            b = side_of(under_b.get(sid), policy_b)
            diff = changes(a, b)
            if diff:
                sample = db.get_sample(sid)
                yield Flip(sid, sample.path if sample else "", diff, a, b)


def policy_diff(
    policy_a: str | os.PathLike[str] | None,
    policy_b: str | os.PathLike[str] | None,
    inputs: Inputs,
    *,
    store: str | os.PathLike[str] | None = None,
    config: AnnotateConfig | str | os.PathLike[str] | None = None,
    options: RunOptions | None = None,
    **overrides: Any,
) -> PolicyDiff:
    """Annotate ``inputs`` under two policies and list every sample whose verdict changes.

    Args:
        policy_a: The current policy file (None or ``vhd11k``: the packaged default).
        policy_b: The candidate policy file.
        inputs: Media files, folders or manifests, as for `vhd.annotate.annotate`.
        store: The store both runs write to and reuse (None: a temporary store, removed after).
        config: An annotate configuration (file or object); its own ``policy`` is replaced.
        options: How the runs go (`vhd.annotate.RunOptions`); a batch API run or another
            executor is refused (their calls cannot be shared here).
        **overrides: Model settings, as for `vhd.annotate.annotate` (``model``, ``judge``,
            ``rounds``, ...), without ``policy``.

    Returns:
        The flips, with the calls made and shared.

    Raises:
        ConfigError: A bad policy file, input or configuration, or options the diff cannot share
            calls under.
    """
    from vhd.aio import run_sync
    from vhd.annotate.api import annotate_config
    from vhd.annotate.options import RunOptions
    from vhd.policy import load_policy

    if "policy" in overrides:
        raise ConfigError("policy_diff takes the two policies as its first arguments: drop policy=")
    from vhd.execution import executor as find_executor

    opts = options or RunOptions()
    if opts.batch_api or not find_executor(opts.executor, opts.executor_options).in_process:
        raise ConfigError(
            "vhd policy diff shares calls between the two runs in this process: drop --batch-api and --executor"
        )
    if opts.dry_run:
        raise ConfigError("vhd policy diff needs the verdicts: drop --dry-run (use vhd annotate --dry-run to estimate)")
    arg_a, arg_b = _policy_arg(policy_a), _policy_arg(policy_b)
    pol_a, pol_b = load_policy(arg_a), load_policy(arg_b)  # a bad file fails before any call
    base = annotate_config(config, **overrides)
    # each side's configuration: the file's own policy replaced, by None too (the packaged default)
    cfg_a, cfg_b = (base.model_copy(update={"policy": arg}) for arg in (arg_a, arg_b))
    with tempfile.TemporaryDirectory(prefix="vhd-policy-diff-") as scratch:
        db_path = Path(store) if store is not None else Path(scratch) / "diff.db"
        return run_sync(_diff(cfg_a, cfg_b, pol_a, pol_b, inputs, db_path, store is not None, opts))


async def _diff(
    cfg_a: AnnotateConfig,
    cfg_b: AnnotateConfig,
    pol_a: Policy,
    pol_b: Policy,
    inputs: Inputs,
    db_path: Path,
    keep: bool,
    opts: RunOptions,
) -> PolicyDiff:
    from vhd.annotate.api import annotate_async
    from vhd.compare.shared_calls import SharedCalls
    from vhd.store.sqlite import open_store

    shared = SharedCalls()
    try:
        with shared.active():
            first = await annotate_async(inputs, store=db_path, config=cfg_a, options=opts)
            second = await annotate_async(inputs, store=db_path, config=cfg_b, options=opts)
    finally:
        shared.close()
    result = PolicyDiff(
        pol_a.key,
        pol_b.key,
        first.config_hash,
        second.config_hash,
        0,
        calls_made=shared.made,
        calls_shared=shared.shared,
        store=str(db_path) if keep else None,
        summaries=[first, second],
    )
    ids = list(_sample_ids(inputs, opts.frame_folders, opts.allow_outside_paths))
    result.compared = len(ids)
    with open_store(db_path) as db:
        result.samples = list(compare_stored(db, ids, first.config_hash, second.config_hash, pol_a, pol_b))
    return result
