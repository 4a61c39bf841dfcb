"""Text-game worlds: TextWorldExpress (`twx`) and TextArena single-player games (`arena`).

Families are imported from their modules by the registry (entry points in lle's pyproject), so
importing this package starts no JVM and imports neither game library.
"""
