"""The metadata store's password reaches Spark's Python workers and executors by reference only.

Spark writes a data source's options into its plans, its UI and its event log, and ships the
functions of a job — with every value they hold — to executors on other machines. A metadata URL
with its password in either would carry the password out of the driver in clear. So the driver
sends the URL without its password, and with it where the password is found on the machine that
opens the store (docs/security.md):

- `metadata_password_file`: a file holding the password. On a local master the driver writes one
  itself, readable by its own user only, removed when the process ends — or, when it was killed
  outright, by the next driver of the same user; on a cluster a file every executor has at that
  path (a mounted secret).
- `metadata_password_env`: the name of an environment variable holding it, set on every executor
  by the deployment (`PASSWORD_ENV`, which the driver must see set to the same password).

`MetadataReference.url()` puts the password back, where the store is opened.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import re
import shutil
import stat
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import ConfigError, InvalidInput
from .masters import is_local_master

URL_OPTION = "metadata_url"
PASSWORD_FILE_OPTION = "metadata_password_file"
PASSWORD_ENV_OPTION = "metadata_password_env"
REFERENCE_OPTIONS = frozenset({PASSWORD_FILE_OPTION, PASSWORD_ENV_OPTION})
# the variable a deployment sets on the driver and every executor to the metadata password
PASSWORD_ENV = "TIDEKEEP_METADATA_PASSWORD"


def split_password(url: str) -> tuple[str, str | None]:
    """`url` without its password (in the user info or a `password` query parameter), and the
    password (None when it has none). A URL SQLAlchemy cannot read is returned as is: it names no
    store that could be opened, and the store's own error reports it (redacted)."""
    import sqlalchemy as sa

    try:
        parsed = sa.make_url(url)
    except (sa.exc.ArgumentError, ValueError):
        return url, None
    password = parsed.password
    query_password = parsed.query.get("password")
    if isinstance(query_password, tuple):  # a parameter given twice: the last one counts, as in libpq
        query_password = query_password[-1] if query_password else None
    if password is None and not query_password:
        return url, None
    # URL.set() ignores a None password: build the URL anew without one
    public = sa.engine.URL.create(parsed.drivername, parsed.username, None, parsed.host, parsed.port,
                                  parsed.database, {k: v for k, v in parsed.query.items() if k != "password"})
    return public.render_as_string(hide_password=False), str(password if password is not None else query_password)


@dataclass(frozen=True)
class MetadataReference:
    """A metadata URL without its password, and where the password is read (None: it has none)."""

    public_url: str
    password_file: str | None = None
    password_env: str | None = None

    def options(self) -> dict[str, str]:
        """The data source options that carry this reference."""
        options = {URL_OPTION: self.public_url}
        if self.password_file is not None:
            options[PASSWORD_FILE_OPTION] = self.password_file
        if self.password_env is not None:
            options[PASSWORD_ENV_OPTION] = self.password_env
        return options

    def url(self) -> str:
        """The URL with its password, read now from the file or the variable; ConfigError naming
        the one that cannot be read (never a value)."""
        password: str | None = None
        if self.password_env is not None:
            password = os.environ.get(self.password_env)
            if not password:
                raise ConfigError(f"the metadata password is not here: environment variable {self.password_env} "
                                  "is not set on this machine (set it on every Spark executor; docs/security.md)")
        elif self.password_file is not None:
            try:
                with open(self.password_file, encoding="utf-8") as handle:
                    password = handle.read().rstrip("\r\n")
            except OSError as exc:
                raise ConfigError(f"cannot read the metadata password file {self.password_file!r} on this machine "
                                  f"({exc.strerror or type(exc).__name__}); docs/security.md") from None
        if password is None:
            return self.public_url
        import sqlalchemy as sa

        return sa.make_url(self.public_url).set(password=password).render_as_string(hide_password=False)


def reference_from_options(options: Mapping[str, str]) -> MetadataReference | None:
    """The reference that lower-cased data source options carry (None without `metadata_url`). A
    `metadata_url` holding a password is refused: it would be in the plan, the UI and the event log."""
    url = options.get(URL_OPTION) or None
    password_file = options.get(PASSWORD_FILE_OPTION) or None
    password_env = options.get(PASSWORD_ENV_OPTION) or None
    if url is None:
        if password_file or password_env:
            raise InvalidInput(f"option {PASSWORD_FILE_OPTION if password_file else PASSWORD_ENV_OPTION!r} "
                               f"needs the option {URL_OPTION!r}")
        return None
    if split_password(url)[1] is not None:
        raise InvalidInput(f"option {URL_OPTION!r} holds a password, which Spark would show in plans and event "
                           f"logs; give the URL without it and the password by reference: option "
                           f"{PASSWORD_FILE_OPTION!r} (a file) or {PASSWORD_ENV_OPTION!r} (a variable name) "
                           "(docs/security.md)")
    if password_file and password_env:
        raise InvalidInput(f"options {PASSWORD_FILE_OPTION!r} and {PASSWORD_ENV_OPTION!r}: give one of them")
    return MetadataReference(url, password_file, password_env)


def deployed_reference(url: str, what: str) -> MetadataReference:
    """The reference for `url` where no private file may be made — in a Spark worker, whose files
    outlive it or vanish with it: none needed, or the deployment's PASSWORD_ENV; else InvalidInput
    saying what to give instead (`what`: the caller, for the message)."""
    public, password = split_password(url)
    if password is None:
        return MetadataReference(public)
    if os.environ.get(PASSWORD_ENV) == password:
        return MetadataReference(public, password_env=PASSWORD_ENV)
    raise InvalidInput(f"{what} cannot pass the password of metadata.url to executors: give the options "
                       f"{URL_OPTION!r} (without the password) and {PASSWORD_FILE_OPTION!r} or "
                       f"{PASSWORD_ENV_OPTION!r}, or set {PASSWORD_ENV} on every node (docs/security.md)")


_PRIVATE_PREFIX = "tidekeep-secret-"
# the private directories this module makes: the prefix, the making process's id, mkdtemp's letters
_PRIVATE_NAME = re.compile(re.escape(_PRIVATE_PREFIX) + r"(\d+)-[A-Za-z0-9_]+")
_files_lock = threading.Lock()
_private_dir: str | None = None
_password_files: dict[str, str] = {}


def _process_is_gone(pid: int) -> bool:
    """Whether no process has id `pid` (one of another user counts as there)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _is_held(path: str) -> bool:
    """Whether a live driver holds its lock on the directory `path` (a lock dies with its process,
    wherever that process runs: pid namespaces do not matter)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return True
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(descriptor)
    return False


def remove_dead_drivers_files(directory: str) -> list[str]:
    """Remove the private password directories in `directory` that drivers of this user killed
    outright left behind (their process is gone and holds no lock on it, so atexit never ran), and
    return them. Only directories of this module's naming, owned by this user, not symbolic links,
    are touched."""
    removed: list[str] = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        found = _PRIVATE_NAME.fullmatch(name)
        if found is None or int(found.group(1)) == os.getpid() or not _process_is_gone(int(found.group(1))):
            continue
        path = os.path.join(directory, name)
        try:
            status = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISDIR(status.st_mode) and status.st_uid == os.getuid() and not _is_held(path):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _private_password_file(password: str) -> str:
    """A file only this user can read holding `password`, one per password for the process's life."""
    global _private_dir
    with _files_lock:
        if password in _password_files:
            return _password_files[password]
        if _private_dir is None:
            remove_dead_drivers_files(tempfile.gettempdir())
            _private_dir = tempfile.mkdtemp(prefix=f"{_PRIVATE_PREFIX}{os.getpid()}-")  # mode 0700
            # held for the process's life (the descriptor is never closed): tells other drivers it is live
            fcntl.flock(os.open(_private_dir, os.O_RDONLY | os.O_DIRECTORY), fcntl.LOCK_SH)
            atexit.register(shutil.rmtree, _private_dir, True)
        path = os.path.join(_private_dir, f"metadata-password-{len(_password_files)}")
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(password)
        _password_files[password] = path
        return path


def password_refusal(url: str, master: str, env: Mapping[str, str]) -> str | None:
    """Why the executors of Spark master `master` could get no reference to the password of `url`
    (None: they can, or it has none): it is not a local master, and `env` (the driver's
    environment) does not hold the password in PASSWORD_ENV. Pure; never says the password."""
    password = split_password(url)[1]
    if password is None or env.get(PASSWORD_ENV) == password or is_local_master(master):
        return None
    return (f"metadata.url holds a password, which tidekeep never sends to the executors of Spark master "
            f"{master!r}; set the environment variable {PASSWORD_ENV} to it on this machine and on every "
            "executor (docs/security.md)")


def metadata_reference(url: str, master: str) -> MetadataReference:
    """How the workers and executors of Spark master `master` get the metadata store at `url`: by
    the variable PASSWORD_ENV when the driver has it set to the URL's password, else on a local
    master by a private file; on any other master without that variable: ConfigError, as the
    password could only travel in clear."""
    public, password = split_password(url)
    if password is None:
        return MetadataReference(public)
    if os.environ.get(PASSWORD_ENV) == password:
        return MetadataReference(public, password_env=PASSWORD_ENV)
    refusal = password_refusal(url, master, os.environ)
    if refusal is not None:
        raise ConfigError(refusal)
    return MetadataReference(public, password_file=_private_password_file(password))


__all__ = ["PASSWORD_ENV", "PASSWORD_ENV_OPTION", "PASSWORD_FILE_OPTION", "REFERENCE_OPTIONS", "URL_OPTION",
           "MetadataReference", "deployed_reference", "metadata_reference", "password_refusal",
           "reference_from_options", "remove_dead_drivers_files", "split_password"]
