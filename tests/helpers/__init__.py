"""Test helpers: subprocess workers (workers.py), launching them (procs.py), and storage views (storage.py)."""
