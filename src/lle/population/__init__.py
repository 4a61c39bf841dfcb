"""Populations of heterogeneous agents: roles, typed messages, skill sharing, fast/slow (see README.md)."""
