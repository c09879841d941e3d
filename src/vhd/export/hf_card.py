"""The dataset card (``README.md``) of an HF export, generated from what the export found."""

from __future__ import annotations

from vhd.export.hf_result import HfExport
from vhd.redaction import hide_local_spec, redact_text


def public_spec(spec: str) -> str:
    """A ``backend:model`` spec as a public card may show it: no local path, no secret.

    Example:
        >>> public_spec("hf:/home/alice/ckpt/qwen-tuned"), public_spec("openai:gpt-4o")
        ('hf:local:qwen-tuned', 'openai:gpt-4o')
    """
    return redact_text(hide_local_spec(spec))


def refusal_rule(result: HfExport) -> str:
    """The card's sentence on refusals: the rule the configurations behind the rows ran under.

    With the default settings (``[debate] refusal_is_harmful = true``) a refusal by a debater, the
    judge or the provider makes the sample harmful (``harmful`` 1, ``status`` ``refused``);
    with it false a judge's refusal leaves ``harmful`` null.
    """
    rules = set(result.refusal_is_harmful.values())
    if rules == {False}:
        return (
            "Refusals are not counted as harmful (`refusal_is_harmful = false`): a debater's refusal "
            "leaves the decision to the judge, and when the judge refused `harmful` is null with "
            "`status` `refused`."
        )
    if rules == {True, False}:
        per = ", ".join(
            f"`{h[:12]}`: {'harmful' if rule else 'not decided'}" for h, rule in result.refusal_is_harmful.items()
        )
        return (
            "The configurations differ on refusals (`refusal_is_harmful`): under true a refusal makes the "
            "sample harmful (`harmful` 1, `status` `refused`), under false a judge's refusal leaves "
            f"`harmful` null; a refusal is {per}."
        )
    return (
        "Refusals count as harmful (`refusal_is_harmful = true`, the default): when a debater, the judge "
        "or the provider refused, `harmful` is 1 and `status` is `refused` (`refused` true), so filter on "
        "`status` to tell a refusal from a debated verdict."
    )


def dataset_card(result: HfExport) -> str:
    """A dataset card: YAML header (licence, task, size), content warning, models, counts, columns."""
    n = result.written
    size = "n<1K" if n < 1_000 else "1K<n<10K" if n < 10_000 else "10K<n<100K" if n < 100_000 else "n>100K"
    splits = "\n".join(f"| {name} | {count} |" for name, count in sorted(result.splits.items()))
    kinds = ", ".join(f"{count} {kind}{'' if count == 1 else 's'}" for kind, count in sorted(result.kinds.items()))
    models = "\n".join(
        f"- {role}: {', '.join(f'`{public_spec(m)}`' for m in specs)}" for role, specs in sorted(result.models.items())
    )
    cats = (
        "\n".join(f"| {name} | {count} |" for name, count in result.categories.items())
        if result.categories
        else "| (none assigned: run `vhd categorize`) | |"
    )
    hashes = ", ".join(f"`{h[:12]}`" for h in result.config_hashes)
    return f"""---
license: other
license_name: per-source
task_categories:
- image-classification
- video-classification
tags:
- vhd
- content-moderation
- harmfulness
size_categories:
- {size}
---

# Visual harmfulness annotations (made with vhd)

> **Content warning.** This dataset may contain images and videos that are violent, sexual,
> hateful or otherwise disturbing, collected to train and test harmfulness detectors. Look at
> the media only when you must, blurred where you can.

{n} annotated samples ({kinds}), annotated by a debate of vision-language models (affirmative,
negative, judge) with `vhd`: {result.harmful - result.refused_harmful} judged harmful by the debate,
{result.refused} refused by a model ({result.refused_harmful} of them counted as harmful), so
{result.harmful} with `harmful` 1. {refusal_rule(result)} Load it with
`datasets.load_from_disk(...)` (or `load_dataset(...)` from the hub).

## Licence

The annotations (verdicts, reasons, debate turns) are yours to license. The media keep the
licences of their sources (stock sites, search engines, video sites, generators): check each
source's terms before you redistribute them; `source`, `keyword` and `generator` say where each
came from. Set `license` in the header above once you know it.

## How it was annotated

Models by role:
{models or "- (no run recorded)"}

Configuration hash(es): {hashes}. `vhd runs STORE` lists the runs and `vhd runs STORE --diff A B`
compares their configurations.

## Splits

| split | rows |
|---|---|
{splits}

## Categories

| category | rows |
|---|---|
{cats}

## Columns

Images and videos share one schema, and its annotation columns are those of vhd's JSON Lines and
Parquet exports (same names; read with `features=vhd.export.schema.hf_features()` those files
load with exactly these types, `harmful` included): `kind` is `image` or `video`, `path` the media file,
`frames` a video's sampled frame indices; `harmful` is the verdict as a class label (`0` not
harmful, `1` harmful, null when undecided; refusals as stated above, `status` says `refused`),
`score` the judge's P(harmful), `label` a human label when one was imported,
`started_at` / `finished_at` UTC timestamps, `decided_by` the cascade stage that decided, `turns`
every argument of the debate (role, round, model, text, tokens, latency), `meta` extra manifest
fields as JSON text, `prompt` and `seed` a synthetic sample's provenance. The media: `image` holds
the image (null for videos) and `video_frames` the video's sampled frames as images (null for
images).
"""
