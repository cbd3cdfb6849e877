"""The fixed start time and lease TTL of the service task tests (tests/service/conftest.py `env`)."""

T0 = 1_700_000_000_000
TTL = 30_000
