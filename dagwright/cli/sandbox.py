"""``dagwright sandbox install``: build the packages sandboxed code may import."""

from __future__ import annotations

import typer

from dagwright.cli.options import ImportOption, settings_from
from dagwright.cli.output import stderr, stdout

app = typer.Typer(help="The sandbox model-written code runs in.", no_args_is_help=True)


def register(parent: typer.Typer) -> None:
    parent.add_typer(app, name="sandbox")


@app.command("install")
def install(imports: ImportOption = None) -> None:
    """Install ``sandbox_packages`` from the package index into ``sandbox_packages_dir``
    (the bubblewrap backend's virtualenv, bound read-only in the sandbox), then ask the
    sandbox what it has. Bounded by ``sandbox_install_timeout_s``; run it again after
    changing the list. The docker backend's packages are built into its image instead."""
    from dagwright.sandbox.environment import describe_sandbox
    from dagwright.sandbox.packages import install_packages

    settings = settings_from(imports)
    sandbox = settings.sandbox
    wanted = ", ".join(sandbox.packages) or "nothing"
    stderr.print(f"installing {wanted} into {sandbox.packages_dir}", markup=False, soft_wrap=True)
    install_packages(sandbox, sandbox.install_timeout_s)
    stdout.print(describe_sandbox(sandbox), markup=False, soft_wrap=True)
