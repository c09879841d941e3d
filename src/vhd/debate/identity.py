"""A debate configuration's identity: everything that changes its messages or decoding, hashed.

Two runs with the same identity ask the models the same questions in the same way, so a store
keeps one annotation per sample and configuration hash, and a resumed run skips what is final.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from vhd.backends.base import Backend
from vhd.config import VIDEO_KEYS, AnnotateConfig
from vhd.debate.icl import ICLExample, examples_identity
from vhd.debate.prompts import Prompts
from vhd.records import Role


def config_identity(
    config: AnnotateConfig, backends: dict[Role, Backend], prompts: Prompts, examples: Sequence[ICLExample]
) -> dict[str, Any]:
    """Everything that changes a debate's messages or decoding, as plain data.

    The keys of native video input (``[media] clip_*``, each role's ``video_input``, the clip
    templates) count only when a role is shown clips: a frames-only configuration keeps the hash
    it had before they existed. A policy other than the packaged default adds its content hash
    (``"policy"``); the default adds nothing, so configurations from before policies keep their hash.
    """
    native = any(b.video_input == "native" for b in backends.values())
    roles = {}
    for role in Role:
        temperature, max_tokens = config.role_settings(role.value)
        roles[role.value] = {"backend": backends[role].identity(), "temperature": temperature, "max_tokens": max_tokens}
        if native:  # a role shown clips asks other questions than one shown frames
            roles[role.value]["video_input"] = backends[role].video_input
    identity: dict[str, Any] = {
        "roles": roles,
        "debate": config.debate.model_dump(),
        "media": config.media.model_dump(exclude=None if native else set(VIDEO_KEYS)),
        "prompts": prompts.identity(clips=native),
        "icl": examples_identity(examples),
    }
    if prompts.policy is not None:
        identity["policy"] = prompts.policy.content_hash
    return identity


def digest(data: Any) -> str:
    """sha256 of canonical JSON."""
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()
