"""U: the update router, its gates, hygiene and lineage (see README.md in this folder)."""
