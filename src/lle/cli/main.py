"""`lle`: the entry point. Each noun is a module of this package with its own typer app."""

from __future__ import annotations

import errno
import sys
from typing import NoReturn

import typer
from rich.text import Text

from lle import __version__
from lle.cli import carriers, evidence, experiences, models, plugins, schema, store, updates, worlds
from lle.cli import episodes as episodes_cmd
from lle.cli import export as export_cmd
from lle.cli import population as population_cmd
from lle.cli import run as run_cmd
from lle.cli import runs as runs_cmd
from lle.cli import serve as serve_cmd
from lle.cli import skills as skills_cmd
from lle.cli import verifier_cases as verifier_cases_cmd
from lle.cli import weights as weights_cmd
from lle.cli.common import err_console, settings
from lle.errors import LleError

app = typer.Typer(
    name="lle",
    help="Large Language Environment: agents that learn from their own verified experience.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(store.app, name="store")
app.add_typer(experiences.app, name="experiences")
app.add_typer(episodes_cmd.app, name="episodes")
app.add_typer(updates.app, name="updates")
app.add_typer(evidence.app, name="evidence")
app.add_typer(models.app, name="models")
app.add_typer(worlds.app, name="worlds")
app.add_typer(carriers.memory_app, name="memory")
app.add_typer(carriers.rules_app, name="rules")
app.add_typer(skills_cmd.app, name="skills")
app.add_typer(verifier_cases_cmd.app, name="verifier-cases")
app.add_typer(export_cmd.app, name="export")
app.add_typer(weights_cmd.app, name="weights")
app.add_typer(population_cmd.app, name="population")
app.command("revoke")(updates.revoke)
app.command("doctor", help="Check that the default model runs on this CPU (same as `lle models check`).")(models.check)
app.command("schema")(schema.schema)
app.command("plugins")(plugins.plugins)
app.command("run")(run_cmd.run)
app.command("serve")(serve_cmd.serve)
app.command("report")(runs_cmd.report_cmd)
app.command("monitor")(runs_cmd.monitor_cmd)
app.add_typer(runs_cmd.runs_app, name="runs")
app.command("view")(runs_cmd.view)


def _version(value: bool) -> None:
    if value:
        print(f"lle {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    workspace: str | None = typer.Option(
        None, "--workspace", "-w", envvar="LLE_WORKSPACE", help="Workspace folder (default ./.lle)."
    ),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    settings.workspace = workspace


def _fail(message: str, code: int = 2) -> NoReturn:
    # One line, naming the input and the fix; the stored data was not touched.
    # The console takes text literally (an id like `[refunded]` or `a:train:1` prints intact): style by Text.
    err_console.print(Text("error:", style="red") + Text(" " + " ".join(message.split())), soft_wrap=True)
    sys.exit(code)


def main() -> None:
    try:
        code = app(standalone_mode=False)  # usage errors come back here, to be printed as one line too
    except LleError as err:
        _fail(str(err), err.exit_code)
    except typer.Abort:
        _fail("interrupted", 130)
    except typer.TyperException as err:  # typer's click errors: a bad option, a missing argument, …
        ctx = getattr(err, "ctx", None)
        if type(err).__name__ == "NoArgsIsHelpError":  # `lle` alone: the help, as before
            print(err.format_message(), file=sys.stderr)
            sys.exit(err.exit_code)
        where = f"`{ctx.command_path} --help`" if ctx is not None else "`lle --help`"
        _fail(f"{err.format_message().rstrip('.')}; see {where}", err.exit_code)
    except OSError as err:
        if err.errno != errno.ENOSPC:
            raise
        # A file written outside the store (a report, an export): the store's own writes say this themselves.
        _fail(f"the disk is full while writing {err.filename or 'a file'}; free space and run the same command "
              "again (resume continues)")
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
