"""Moderation policies: one file with categories, exceptions, a severity scale and examples.

The policy is what "harmful" means for a run: the debaters' and judge's prompts, category
assignment and the in-context examples are rendered from it (`vhd annotate --policy FILE`).
The packaged default (`default_policy`) is the VHD11K paper's definition with its ten categories
and leaves prompts and configuration hashes exactly as they were before policies existed.

Example:
    >>> from vhd.policy import default_policy
    >>> default_policy().key
    'vhd11k@1.0'
"""

from __future__ import annotations

from vhd.policy.load import (
    DEFAULT_POLICY,
    MAX_POLICY_BYTES,
    PolicyError,
    default_policy,
    is_default,
    load_policy,
    parse_policy,
    policy_json_schema,
)
from vhd.policy.model import MediumText, Policy, PolicyCategory, PolicyExample, SeverityLevel

__all__ = [
    "DEFAULT_POLICY",
    "MAX_POLICY_BYTES",
    "MediumText",
    "Policy",
    "PolicyCategory",
    "PolicyError",
    "PolicyExample",
    "SeverityLevel",
    "default_policy",
    "is_default",
    "load_policy",
    "parse_policy",
    "policy_json_schema",
]
