"""What an annotation run works from, settled before any sample is read: `Plan`.

`make_plan` checks the inputs, builds the backends (and prechecks them where they run here),
loads the in-context examples and computes the configuration hash. The run and its dry-run
estimate both start from the one plan, so they cannot disagree about what would run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vhd.annotate.options import RunOptions
from vhd.config import AnnotateConfig

if TYPE_CHECKING:
    from vhd.backends.base import Backend
    from vhd.debate.engine import Debate
    from vhd.debate.icl import ICLExample
    from vhd.debate.prompts import Prompts
    from vhd.debate.stagewise import Cohorts
    from vhd.execution import Executor
    from vhd.media.discover import PlainFile, Skipped
    from vhd.media.load import MediaSettings
    from vhd.policy import Policy
    from vhd.records import MediaItem, Role, Usage

RETRY_BUDGET = 4
"""With ``retry_unparsed``, a call cut off by the token limit is asked once more with this many times its cap."""


@dataclass(frozen=True)
class Plan:
    """One run's settled inputs, configuration and the things derived from them.

    Attributes:
        inputs: The paths to discover samples in.
        config: The configuration, overrides applied.
        store: The store's file.
        options: How the run goes.
        executor: Where samples are debated (None: in this process).
        prompts: The prompt templates.
        settings: How media are loaded (frames per video, pixel limits, ...).
        backends: The model backend of each role.
        examples: The judge's in-context examples.
        config_hash: The configuration's identity (the cascade included).
        known: Whether a manifest row names a sample the store holds (such rows may lead anywhere).
    """

    inputs: list[str | Path]
    config: AnnotateConfig
    store: Path
    options: RunOptions
    executor: Executor | None
    prompts: Prompts
    settings: MediaSettings
    backends: dict[Role, Backend]
    examples: list[ICLExample]
    config_hash: str
    known: Callable[[str | None, Path], bool] | None

    @property
    def policy(self) -> Policy:
        """The run's policy (the packaged default when none was given)."""
        from vhd.policy import default_policy

        return self.prompts.policy or default_policy()

    @property
    def retry_budget(self) -> int:
        """How many times its token cap a cut-off call gets when asked again (1: not asked again)."""
        return RETRY_BUDGET if self.options.retry_unparsed else 1

    @property
    def unique_backends(self) -> list[Backend]:
        """The backends, each once (roles may share one)."""
        return list({id(b): b for b in self.backends.values()}.values())

    def discover(
        self,
        first_seen: Callable[[str], bool],
        *,
        record_new: Callable[[str], None] | None = None,
        plain_files: bool = False,
    ) -> Iterator[MediaItem | PlainFile | Skipped]:
        """Stream what the inputs hold (`vhd.media.discover.iter_discover`) under the run's discovery rules."""
        from vhd.media.discover import iter_discover

        rules: dict[str, Any] = {
            "frame_folders": self.options.frame_folders,
            "allow_outside_paths": self.options.allow_outside_paths,
            "known": self.known,
            "first_seen": first_seen,
            "record_new": record_new,
        }
        if plain_files:
            return iter_discover(list(self.inputs), plain_files=True, **rules)
        return iter_discover(list(self.inputs), **rules)

    def debate(self, backends: dict[Role, Backend], on_call: Callable[[Usage], None]) -> Debate | Cohorts:
        """The debate over ``backends`` (the plan's, or their batch-API stand-ins), stage-wise when asked."""
        from vhd.debate.engine import Debate

        debate = Debate(
            backends, self.config, self.prompts, self.examples, on_call=on_call, retry_budget=self.retry_budget
        )
        if self.options.stage_wise or self.options.batch_api:  # debates advance in lockstep, a cohort at a time
            from vhd.debate.stagewise import Cohorts

            return Cohorts(debate, self.config.concurrency)
        return debate


def make_plan(
    inputs: list[str | Path], config: AnnotateConfig, *, store: Path, options: RunOptions, executor: Executor | None
) -> Plan:
    """Settle a run: check the inputs and backends, load the examples, compute the configuration hash.

    Raises:
        vhd.errors.ConfigError: Bad inputs or configuration; a batch run whose backends cannot batch.
        vhd.errors.BackendUnavailableError: A backend that runs here cannot work at all.
    """
    from vhd.backends.base import check_video_input
    from vhd.backends.registry import build_backends
    from vhd.debate.icl import load_examples, policy_examples
    from vhd.debate.identity import config_identity, digest
    from vhd.debate.prompts import Prompts
    from vhd.labels.rules import store_lookup
    from vhd.media.discover import check_inputs
    from vhd.media.load import media_settings
    from vhd.policy import load_policy

    base = Path(config.base_dir) if config.base_dir else None
    policy = load_policy(config.resolve_path(config.policy)) if config.policy else None
    prompts = Prompts(config.prompts, base, policy=policy)
    settings = media_settings(config.media)
    known = store_lookup(store)  # manifest rows naming the store's samples may lead anywhere
    check_inputs(list(inputs))
    backends = build_backends(config)
    if any(b.video_input == "native" for b in backends.values()):  # video files get a clip too
        settings = media_settings(config.media, native=True)
    for backend in {id(b): b for b in backends.values()}.values():
        check_video_input(backend)  # a backend that can never send a video: before any work
        if executor is None:  # elsewhere a model path may exist only where the workers run
            backend.precheck()  # before the identity below imports torch for a local model
    if options.batch_api:
        from vhd.annotate.batch import check_batchable

        check_batchable(backends)
    examples = load_examples(config.resolve_path(config.icl), settings) if config.icl else []
    if policy is not None and config.policy:  # the policy's own examples follow the --icl ones
        examples += policy_examples(policy, config.resolve_path(config.policy).parent, settings)
    identity = config_identity(config, backends, prompts, examples)
    if options.cascade is not None:  # stages decide some verdicts: a distinct configuration
        identity = {**identity, "cascade": options.cascade.identity()}
    if config.video.segments:  # verdicts from segments: a distinct configuration
        from vhd.annotate.segmented import segments_identity
        from vhd.errors import ConfigError

        if options.stage_wise or options.batch_api:
            raise ConfigError("--segments works with ordinary debates: leave out --stage-wise and --batch-api")
        identity = {**identity, "video": segments_identity(config.video)}
    return Plan(
        inputs=list(inputs),
        config=config,
        store=store,
        options=options,
        executor=executor,
        prompts=prompts,
        settings=settings,
        backends=backends,
        examples=examples,
        config_hash=digest(identity),
        known=known,
    )
