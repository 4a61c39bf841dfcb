"""Governance primitives used by the carriers and the router: gates, lineage and revocation, hygiene, PII."""
