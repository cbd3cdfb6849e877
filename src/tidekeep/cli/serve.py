"""`tidekeep serve`: the controller service (retention cycles, the orphan-chunk sweep, leases) and
the HTTP API; `tidekeep api`: the API alone. Commands of the root app (main.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from ..errors import InvalidInput
from ..units import parse_duration_ms
from .context import load, require_workspace

if TYPE_CHECKING:
    from ..api.server import ApiOptions, ApiServer
    from ..config import Settings
    from ..service.server import ServeOptions
    from ..store.house import Workspace

ListenOption = Annotated[str | None, typer.Option(
    "--listen", metavar="HOST:PORT", help="Serve the HTTP API here [default: api.listen, 127.0.0.1:8620]")]


def _duration(flag: str, value: str | None, default_ms: int) -> int:
    if value is None:
        return default_ms
    try:
        result = parse_duration_ms(value)
    except InvalidInput as exc:
        raise InvalidInput(f"bad {flag}: {exc}") from None
    if result <= 0:
        raise InvalidInput(f"bad {flag}: must be greater than zero, got {value!r}")
    return result


def serve_command(
    ctx: typer.Context,
    once: Annotated[bool, typer.Option("--once", help="Run one pass over the streams, then exit")] = False,
    frequency: Annotated[str | None, typer.Option(
        "--frequency", metavar="D", help="Space runs of a stream by this, from the end of its last run "
        "[default: retention.frequency]")] = None,
    lease_ttl: Annotated[str | None, typer.Option(
        "--lease-ttl", metavar="D", help="Leases not renewed for this long are taken over [default: 30s]")] = None,
    sweep_every: Annotated[str | None, typer.Option(
        "--sweep-every", metavar="D", help="Run the orphan-chunk sweep this often [default: 1h]")] = None,
    json_logs: Annotated[bool, typer.Option("--json-logs", help="Log JSON lines instead of text")] = False,
    no_catalog: Annotated[bool, typer.Option(
        "--no-catalog", help="Do not run the catalog job and purge on catalog.schedule")] = False,
    no_archives: Annotated[bool, typer.Option(
        "--no-archives", help="Do not run the archive and search-result garbage collectors")] = False,
    no_compaction: Annotated[bool, typer.Option(
        "--no-compaction", help="Do not compact streams' small chunks (chunks.compaction_interval)")] = False,
    watermark_frequency: Annotated[str | None, typer.Option(
        "--watermark-frequency", metavar="D",
        help="Compute the watermarks of streams with recent writer marks this often "
             "[default: watermark.frequency]")] = None,
    no_watermarks: Annotated[bool, typer.Option(
        "--no-watermarks", help="Do not compute watermarks")] = False,
    no_api: Annotated[bool, typer.Option("--no-api", help="Do not serve the HTTP API")] = False,
    listen: ListenOption = None,
) -> None:
    """Run the controller service: retention cycles for every stream with a policy, the sweep,
    compaction of small chunks every chunks.compaction_interval (default 10m), the catalog job
    then the purge on catalog.schedule (cron, UTC; default daily at 00:00), and
    the archive and search-result garbage collectors on garbage_collector.sweep_interval (those
    whose retention period is set), and the watermarks of streams whose writers note time, every
    watermark.frequency (default 1s) by the owner of the stream's lease.

    Several processes on one PostgreSQL store divide the streams through leases. SIGTERM or
    SIGINT finishes the current stream, releases the leases and exits 0. Logs go to stderr.

    The HTTP API (docs/api.md) listens on api.listen (default 127.0.0.1:8620) unless --no-api.
    """
    from ..service.server import ServeOptions, configure_service_logging

    settings = load(ctx)
    require_workspace(settings)
    # checked even with --no-watermarks: a bad flag is an error whatever else is given
    watermark_every = _duration("--watermark-frequency", watermark_frequency, settings["watermark.frequency"])
    options = ServeOptions(
        frequency_ms=_duration("--frequency", frequency, settings["retention.frequency"]),
        lease_ttl_ms=_duration("--lease-ttl", lease_ttl, 30_000),
        sweep_every_ms=_duration("--sweep-every", sweep_every, 3_600_000),
        once=once, json_logs=json_logs, catalog=not no_catalog, archives=not no_archives, compaction=not no_compaction,
        watermark_every_ms=None if no_watermarks else watermark_every)
    api_options = None if no_api or once else checked_api_options(settings, listen)
    configure_service_logging(settings["log.level"], json_logs)
    raise typer.Exit(serve_with_api(settings, options, api_options))


def serve_with_api(settings: Settings, options: ServeOptions, api_options: ApiOptions | None) -> int:
    """The service in this thread and, unless `api_options` is None, the API in another, on one
    open workspace; the API stops when the service does."""
    from ..service.assembly import families_of
    from ..service.server import serve
    from ..store.house import open_workspace

    workspace = open_workspace(settings)
    api = None
    try:
        if api_options is not None:
            api = api_server(settings, workspace, api_options)
            api.start()
        return serve(workspace, options, families=families_of(workspace))
    finally:
        if api is not None:
            api.stop()
        workspace.close()


def api_server(settings: Settings, workspace: Workspace, options: ApiOptions) -> ApiServer:
    """The API, with the dashboard at / unless api.dashboard is false."""
    from ..api.app import create_app
    from ..api.server import ApiServer
    from ..web import dashboard_app

    return ApiServer(workspace, options, dashboard_app if settings["api.dashboard"] else create_app)


def checked_api_options(settings: Settings, listen: str | None) -> ApiOptions:
    """The API's options, refused (ConfigError) before anything starts when unsafe or malformed."""
    from ..api.server import api_options
    from ..config import parse_listen

    if listen is not None:
        try:
            parse_listen(listen)
        except InvalidInput as exc:
            raise InvalidInput(f"bad --listen: {exc}") from None
    return api_options(settings, listen)


def api_command(
    ctx: typer.Context,
    listen: ListenOption = None,
    json_logs: Annotated[bool, typer.Option("--json-logs", help="Log JSON lines instead of text")] = False,
) -> None:
    """Serve the HTTP API alone (no retention cycles): FastAPI on uvicorn at api.listen, versioned
    under /api/v1, OpenAPI at /openapi.json, interactive docs at /docs, metrics at /metrics.

    Every request needs a token (`tidekeep token create`) unless api.auth is false, which is
    allowed on a loopback address only. SIGTERM or SIGINT stops it. docs/api.md.
    """
    from ..service.server import configure_service_logging
    from ..store.house import open_workspace

    settings = load(ctx)
    require_workspace(settings)
    options = checked_api_options(settings, listen)
    configure_service_logging(settings["log.level"], json_logs)
    workspace = open_workspace(settings)
    try:
        api_server(settings, workspace, options).run()
    finally:
        workspace.close()
