"""Tests of `vhd.policy`; `ACME_POLICY` is the policy file issue 32 says must load, shared by the tests."""

ACME_POLICY = """\
name: acme-moderation
version: "2026-11"
categories:
  - id: violence
    description: Physical harm to people or animals.
    forbids: ["graphic injury", "threats with a weapon"]
    allows: ["educational medical imagery such as X-rays"]
severity:
  - {name: low, meaning: suggestive or mild}
  - {name: high, meaning: graphic or explicit}
"""
