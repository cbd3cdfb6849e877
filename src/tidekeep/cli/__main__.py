"""`python -m tidekeep.cli` runs the tidekeep command."""

from .main import main

main()
