"""Places on a filesystem in a normal form, and whether one overlaps another (pure).

A place is an absolute local path (`/data/x`, scheme `file`) or a URI (`file:///data/x`,
`s3://bucket/x`). Every decision is made on a normal form, so what is checked is what is later
touched: a URI's path is percent-decoded first (pyarrow decodes it too: `file:///d/%73treams` is
`/d/streams`); then empty and `.` segments are dropped and `..` removes the segment before it
(lexically, without looking at symlinks); the scheme is lower case; plain absolute paths are `file`
places. Scheme aliases that pyarrow opens alike are one scheme (`local://` is `file://`, `gcs://`
is `gs://`). Containment is by whole segments: `/data/rootX` is not inside `/data/root`. The
overlap with tidekeep's own areas ignores case (a case-insensitive filesystem must not let
`Streams/` alias `streams/`) and, on object stores, the bucket or host (it has many spellings).

The settings check `catalog.data_roots` with it (workspace_areas.py), and the catalog decides
where a record's data may live with it (catalog/locations.py, docs/catalog-purge.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import quote, unquote

_URI = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://(.*)", re.DOTALL)
# schemes pyarrow opens as another one: a location must not dodge a rule by spelling its scheme differently
SCHEME_ALIASES = {"local": "file", "gcs": "gs"}
SHOWN = 200  # characters of a location quoted in a message


@dataclass(frozen=True)
class Place:
    """An absolute place on one filesystem, in normal form."""

    scheme: str  # lower case; "file" for local paths
    authority: str  # "" for local paths; the bucket, or host[:port], of a URI
    path: str  # "/" or "/a/b": no empty, "." or ".." segments, no trailing slash

    @property
    def text(self) -> str:
        """A local path for `file` places, a URI otherwise."""
        return self.path if self.scheme == "file" else f"{self.scheme}://{self.authority}{self.path}"

    @property
    def uri(self) -> str:
        """A spelling that parses back to this place: the path of a local place; otherwise a URI
        whose path is percent-quoted (parsing decodes it, so a literal "%" must stay quoted)."""
        return self.path if self.scheme == "file" else f"{self.scheme}://{self.authority}{quote(self.path, safe='/')}"

    def child(self, relative: str) -> Place:
        return Place(self.scheme, self.authority, self.path.rstrip("/") + "/" + relative)

    def folded(self) -> Place:
        return Place(self.scheme, self.authority.casefold(), self.path.casefold())


@dataclass(frozen=True)
class Area:
    """One of tidekeep's own areas, which no record may reach."""

    place: Place
    what: str  # "stream data", "metadata database", ...


@dataclass(frozen=True)
class FoldedArea:
    """An area case-folded once: the overlap check runs for every row of an import."""

    scheme: str
    path: str
    prefix: str  # what the paths under it start with
    area: Area

    @staticmethod
    def of(area: Area) -> FoldedArea:
        folded = area.place.folded()
        return FoldedArea(folded.scheme, folded.path, path_prefix(folded.path), area)


def path_prefix(path: str) -> str:
    """What the paths under `path` start with."""
    return path if path == "/" else path + "/"


class Refused(ValueError):
    """A location (or data root) that has no acceptable normal form; args[0] is the reason."""


def shown(text: str) -> str:
    return repr(text if len(text) <= SHOWN else text[:SHOWN] + "...")


def normal_segments(path: str, absolute: bool) -> list[str] | None:
    """The segments of `path` with empty and "." segments dropped and ".." applied; None when a
    relative path climbs above its start (an absolute one stays at "/", as POSIX has it)."""
    out: list[str] = []
    for segment in path.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if out:
                out.pop()
            elif not absolute:
                return None
            continue
        out.append(segment)
    return out


def absolute_place(scheme: str, authority: str, path: str) -> Place:
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise Refused("is not valid UTF-8 text") from None
    segments = normal_segments(path, absolute=True)
    assert segments is not None  # an absolute path never climbs out
    return Place(scheme, authority, "/" + "/".join(segments))


def is_uri(text: str) -> bool:
    return _URI.fullmatch(text) is not None


def parse_uri(text: str, keep_query: bool = False) -> Place:
    """A `scheme://authority/path` URI as a Place; Refused when it cannot be read safely. A query
    or fragment is refused unless `keep_query` (then dropped: the storage URI may carry pyarrow
    options such as ?region=...)."""
    match = _URI.fullmatch(text)
    if match is None:
        raise Refused("is not a URI")
    scheme, rest = match.group(1).lower(), match.group(2)
    scheme = SCHEME_ALIASES.get(scheme, scheme)
    if "?" in rest or "#" in rest:
        if not keep_query:
            raise Refused("has a query or fragment, which a location URI may not carry")
        rest = re.split(r"[?#]", rest, maxsplit=1)[0]
    authority, _, path = rest.partition("/")
    if "%" in authority:
        raise Refused("has a percent-escape in its host or bucket")
    if scheme == "file" and authority:
        raise Refused("names a host: a file URI must be file:///<absolute path>")
    try:
        decoded = unquote("/" + path, errors="strict")
    except UnicodeDecodeError:
        raise Refused("is not valid percent-encoded UTF-8") from None
    if "\x00" in decoded:
        raise Refused("contains a NUL character")
    return absolute_place(scheme, authority, decoded)


def split_options(text: str) -> tuple[str, str]:
    """A root as written (a `catalog.data_roots` entry): (the root without its options, its options).
    The options are a URI's query — pyarrow's filesystem options, such as
    `?endpoint_override=host:9000&scheme=http&region=eu-west-1` — and "" when it has none; a plain
    path has none ("?" is a character of its name). A fragment is Refused: pyarrow has no use for
    one."""
    if not is_uri(text):
        return text, ""
    if "#" in text:
        raise Refused("has a fragment, which a data root may not carry")
    root, _, options = text.partition("?")
    return root, options


def parse_root(text: str) -> Place:
    """The place of a root as written, its options aside (split_options); Refused otherwise."""
    return parse_absolute(split_options(text)[0])


def parse_absolute(text: str) -> Place:
    """An absolute local path or a URI as a Place (data roots); Refused otherwise."""
    if is_uri(text):
        return parse_uri(text)
    if not text.startswith("/"):
        raise Refused("is neither an absolute path nor a URI")
    if "\x00" in text:
        raise Refused("contains a NUL character")
    return absolute_place("file", "", text)


def inside(outer: Place, inner: Place, strict: bool = False) -> bool:
    """Whether `inner` is `outer` or lies under it (strictly under it when `strict`), by whole segments."""
    if outer.scheme != inner.scheme or outer.authority != inner.authority:
        return False
    if inner.path == outer.path:
        return not strict
    return outer.path == "/" or inner.path.startswith(outer.path + "/")


def overlap_folded(place: Place, folded_areas: Iterable[FoldedArea]) -> str | None:
    """Why `place` may not be touched, against areas folded once (FoldedArea.of); None if it may."""
    # inlined rather than calling inside(): this runs for every row of an import. The authority is
    # not compared: one bucket or host has many spellings (credentials, endpoints, account
    # suffixes), so an area's path is off limits under every authority of its scheme
    path = place.path.casefold()
    prefix = path_prefix(path)
    for mine in folded_areas:
        if mine.scheme != place.scheme:
            continue
        if path == mine.path or path.startswith(mine.prefix):
            return f"lies inside tidekeep's {mine.area.what} ({mine.area.place.text})"
        if mine.path.startswith(prefix):
            return f"contains tidekeep's {mine.area.what} ({mine.area.place.text})"
    return None


def overlap(place: Place, areas: Iterable[Area]) -> str | None:
    """Why `place` may not be touched: it lies inside or contains one of `areas`; None if neither."""
    return overlap_folded(place, (FoldedArea.of(a) for a in areas))


__all__ = ["SCHEME_ALIASES", "SHOWN", "Area", "FoldedArea", "Place", "Refused", "absolute_place", "inside", "is_uri",
           "normal_segments", "overlap", "overlap_folded", "parse_absolute", "parse_root", "parse_uri", "path_prefix",
           "shown", "split_options"]
