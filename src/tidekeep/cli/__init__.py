"""The `tidekeep` command line (Typer). Entry point: tidekeep.cli.main:main."""
