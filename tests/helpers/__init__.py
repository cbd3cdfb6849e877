"""Test helpers: subprocess workers (workers.py), launching them (procs.py), and storage views (storage.py)."""

from pathlib import Path

HELPERS_DIR = Path(__file__).parent  # worker scripts run as subprocesses by path
