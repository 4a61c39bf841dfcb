"""The flywheel: rounds of experience, held-out evaluation, the report (see README.md)."""
