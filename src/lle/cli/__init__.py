"""The `lle` command line (typer, noun-verb). See README.md in this folder."""
