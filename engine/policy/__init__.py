"""The policy language: parse → check → lower to the rule IR (see docs/policy-language.md)."""
