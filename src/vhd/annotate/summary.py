"""The summary of an annotation run: counts, never per-sample lists that grow with the run."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from vhd.config import AnnotateConfig
from vhd.errors import require
from vhd.records import Status, Usage


@dataclass
class RunSummary:
    """What an annotation run did.

    Attributes:
        run_id: The store's run id (None for a dry run).
        store: Path of the store.
        config_hash: The configuration's hash: ``Store.verdicts(summary.config_hash)`` reads the
            run's verdicts back (with the earlier runs' under the same configuration).
        found: Readable samples found in the inputs (after de-duplication by content).
        already_done: Samples that already had a final verdict and were not asked again.
        annotated: Samples that got a final verdict in this run.
        harmful: Of those, harmful (refusals included).
        unharmful: Of those, unharmful.
        refused: Of those, decided by a refusal.
        unparsed: Of those, whose judge reply could not be read.
        truncated: Of those, ended by a reply cut off by the token limit (neither a verdict nor a
            refusal; ``--retry-unparsed`` asks again with a larger cap).
        budget_fix: What to do about truncated replies, one clause naming the caps (set by the run,
            only when ``truncated`` is not 0).
        errors: Samples whose model calls failed (retried on the next run).
        skipped: Input files that could not be used, with reasons in the store.
        rows_left_out: Of those, manifest rows that could not be read at all (exit 1).
        duplicates: Inputs whose content was already among the samples.
        excluded: Samples left out because the store marks them removed, quarantined, or a
            duplicate of a kept sample (reasons in ``skip_reasons``).
        remaining: Samples not attempted, or whose result could not be saved (interrupted,
            stopped at the budget or by a store error).
        leased: Samples skipped because another live run on the store was annotating them.
        leased_unfinished: Of those, the ones still without a final verdict when this run ended.
        usage: Calls, tokens and cost of this run: every answered call, samples abandoned by a
            second Ctrl-C included.
        elapsed_s: Wall time.
        interrupted: Stopped by Ctrl-C.
        budget_reached: Stopped by ``max_cost``.
        dry_run: Nothing was sent; see ``estimate``.
        estimate: For a dry run, the expected calls, tokens and cost.
        skip_reasons: ``(path, reason)`` for each skipped input (first 1000).
        store_error: One line when the store could not be written (full disk...): what happened,
            what is saved, and that the same command resumes; None otherwise.
        endpoints: Per endpoint the run's backends sent requests to (display URL, no
            credentials): requests, errors, cool-downs, mean and max latency, tokens, rate-limit
            waits. Empty for backends without endpoints (``hf``, ``scripted``).
        local: Per backend that runs a model in this process (``hf``), keyed by its spec: seconds
            preprocessing and generating, the image processor used, image passes
            (`vhd.backends.base.Backend.local_stats`).
        stage_wise: The debate ran stage by stage over cohorts of samples (`vhd.debate.stagewise`).
        decided_by: In a cascade run, verdicts of this run by the stage that decided them
            (``debate`` for those that went through); one entry per stage.
        stage_calls: Calls made by cascade stages (also counted in ``usage.calls``).
        batches: Batches this run created with ``--batch-api``.
        segments: With ``--segments``, segments of the videos this run finished.
        segments_capped: Of those, segments the call cap per video left at their screen verdict.
        videos_cut_short: Videos whose segments ended before the video did (the call cap spent, or
            ``max_segments_per_video`` reached): the rest of each was not judged, its verdict says
            from where, and the run's events name each.

    ``to_dict`` adds ``cached_share``: the share of prompt tokens the endpoint served from its
    prompt cache (None without prompt tokens).
    """

    run_id: str | None
    store: str
    config_hash: str = ""
    found: int = 0
    already_done: int = 0
    annotated: int = 0
    harmful: int = 0
    unharmful: int = 0
    refused: int = 0
    unparsed: int = 0
    truncated: int = 0
    budget_fix: str = ""
    errors: int = 0
    skipped: int = 0
    rows_left_out: int = 0
    duplicates: int = 0
    excluded: int = 0
    remaining: int = 0
    leased: int = 0
    leased_unfinished: int = 0
    usage: Usage = field(default_factory=Usage)
    elapsed_s: float = 0.0
    interrupted: bool = False
    budget_reached: bool = False
    dry_run: bool = False
    estimate: dict[str, Any] | None = None
    skip_reasons: list[tuple[str, str]] = field(default_factory=list)
    store_error: str | None = None
    decided_by: dict[str, int] = field(default_factory=dict)
    stage_calls: int = 0
    batches: int = 0
    endpoints: dict[str, dict[str, Any]] = field(default_factory=dict)
    local: dict[str, dict[str, Any]] = field(default_factory=dict)
    stage_wise: bool = False
    segments: int = 0
    segments_capped: int = 0
    videos_cut_short: int = 0

    def exit_code(self, strict: bool = False) -> int:
        """0 when every readable sample has a final verdict, 1 when work remains, 130 after Ctrl-C.

        Work remains after errors, truncated samples (their budget needs raising), samples not
        attempted, samples another run had leased and not finished by the end of this one, and a
        store that could not be written. Manifest rows that could not be read also give 1.
        """
        if self.interrupted:
            return 130
        unfinished = self.errors or self.truncated or self.remaining or self.leased_unfinished
        if self.store_error or unfinished or self.rows_left_out or (strict and self.skipped):
            return 1
        return 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (stored with the run)."""
        d = asdict(self)
        d["skip_reasons"] = d["skip_reasons"][:50]
        d["cached_share"] = self.usage.cached_share
        return d

    def counts(self) -> dict[str, Any]:
        """The run's numbers, flat: run, store, configuration, counts, usage, time and how it ended.

        Every scalar field (lists and per-endpoint tables left out), the usage's ``calls``,
        ``prompt_tokens``, ``completion_tokens`` and ``cost`` beside them: `to_pandas`'s row.
        """
        skip = {"estimate", "budget_fix"}
        d = {k: v for k, v in asdict(self).items() if k not in skip and not isinstance(v, dict | list | tuple)}
        for name in ("calls", "prompt_tokens", "completion_tokens", "cost"):
            d[name] = getattr(self.usage, name)
        return d

    def to_pandas(self) -> Any:
        """`counts` as a one-row pandas ``DataFrame`` indexed by ``run_id``.

        ``pandas.concat([s.to_pandas() for s in summaries])`` lines runs up side by side. Needs
        pandas.
        """
        pd: Any = require("pandas", "parquet")
        return pd.DataFrame([self.counts()]).set_index("run_id")

    def _outcome(self) -> str:
        if self.dry_run:
            return "dry run, nothing sent"
        ended = "interrupted" if self.interrupted else "stopped at max_cost" if self.budget_reached else "finished"
        return f"{ended} in {self.elapsed_s:.1f}s, exit code {self.exit_code()}"

    def __repr__(self) -> str:
        """One line per topic: the verdicts, what is left, the cost; ``.to_pandas()`` has every number."""
        run = (self.run_id or "-")[:12]
        cost = f", ${self.usage.cost:.4f}" if self.usage.cost else ""
        lines = [
            f"RunSummary: run {run} on {self.store} ({self._outcome()})",
            f"  {self.found} found, {self.already_done} already done, {self.annotated} annotated: "
            f"{self.harmful} harmful ({self.refused} refused), {self.unharmful} not harmful, "
            f"{self.unparsed} unparsed, {self.truncated} truncated",
            f"  {self.errors} errors, {self.remaining} remaining, {self.skipped} skipped, "
            f"{self.duplicates} duplicates; {self.usage.calls} calls{cost}",
        ]
        if self.store_error:
            lines.append(f"  store error: {self.store_error}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """The numbers as a two-column HTML table, for a notebook cell."""
        import html

        shown = (
            "found",
            "already_done",
            "annotated",
            "harmful",
            "refused",
            "unharmful",
            "unparsed",
            "truncated",
            "errors",
            "remaining",
            "skipped",
            "duplicates",
            "calls",
            "cost",
        )
        numbers = self.counts()
        rows = "".join(
            f"<tr><th>{html.escape(k.replace('_', ' '))}</th><td>{html.escape(str(numbers[k]))}</td></tr>"
            for k in shown
        )
        title = html.escape(f"run {(self.run_id or '-')[:12]} on {self.store} ({self._outcome()})")
        return f'<table class="vhd-run"><caption>RunSummary: {title}</caption><tbody>{rows}</tbody></table>'


def count_status(summary: RunSummary, status: Status, harmful: bool | None) -> None:
    """Add one finished sample to a summary."""
    if status is Status.ERROR:
        summary.errors += 1
        return
    summary.annotated += 1
    if status is Status.UNPARSED:
        summary.unparsed += 1
        return
    if status is Status.TRUNCATED:
        summary.truncated += 1
        return
    if status is Status.REFUSED:
        summary.refused += 1
    if harmful is True:
        summary.harmful += 1
    elif harmful is False:
        summary.unharmful += 1


def budget_fix(config: AnnotateConfig, factor: int, *, retried: bool) -> str:
    """What to do about replies cut off by the token limit, in one clause that names the caps.

    Args:
        config: The run's configuration (its token caps).
        factor: How many times its cap a cut-off call gets when asked again.
        retried: The run already asked again (``--retry-unparsed``): the flag is not suggested.
    """
    judge, debater = config.debate.judge_max_tokens, config.debate.debater_max_tokens
    again = "" if retried else f", or run again with --retry-unparsed to re-ask them with {factor}x the cap"
    return (
        f"replies hit the token limit (judge_max_tokens {judge}, debater_max_tokens {debater}): raise them in "
        "[debate] (reasoning models spend hidden tokens from the same budget: also set max_tokens_field = "
        f'"max_completion_tokens" and maybe reasoning_effort = "low" in the backend table){again}'
    )
