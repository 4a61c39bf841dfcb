"""U: update carriers, from most to least revocable (see README.md in this folder)."""
