"""The web dashboard: server-rendered pages (Jinja2 and htmx) on top of the API's state and tokens,
served by `tidekeep serve` and `tidekeep api` at / (docs/dashboard.md)."""

from .app import dashboard_app

__all__ = ["dashboard_app"]
