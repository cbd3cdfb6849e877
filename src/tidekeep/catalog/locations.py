"""Where a catalog record's data may live: pure decisions on a record's `location`
(docs/catalog-purge.md, "Where a record's data may live").

A location is
- relative: a path under the storage root (`storage.uri`); it may not climb out of the root;
- absolute: a local path (`/data/x`) or a URI (`file:///data/x`, `s3://bucket/x`); it is accepted
  only strictly inside one of the `catalog.data_roots`.
Either way it may not overlap (lie inside, be, or contain) one of tidekeep's own areas: the stream
data (`streams/` under the storage root: chunk files and each stream's `txn/` staging), the log
archives (`archives/`), the search results (`search-results/`), the SQLite metadata file with its
siblings, and the workspace's tidekeep.yaml. The purge deletes what a record names, so a location
is untrusted data: without these rules one bad row deletes a stream's chunks or the metadata file.

Every decision is made on a normal form, and the purge deletes exactly that normal form, so what is
checked is what is deleted: a URI's path is percent-decoded first (pyarrow decodes it too:
`file:///d/%73treams` is `/d/streams`); then empty and `.` segments are dropped and `..` removes
the segment before it (lexically, without looking at symlinks: the purge's shell checks the real
path of local files separately); the scheme is lower case; plain absolute paths are `file` places.
The comparison with tidekeep's areas ignores case (a case-insensitive filesystem must not let
`Streams/` alias `streams/`) and, on object stores, the bucket or host (it has many spellings);
the comparison with data roots does neither (refusing is the safe side both ways). Scheme aliases
that pyarrow opens alike are one scheme (`local://` is `file://`, `gcs://` is `gs://`).
Containment is by whole segments: `/data/rootX` is not inside `/data/root`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import quote, unquote

from ..errors import InvalidInput

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
class LocationRules:
    storage_root: Place
    areas: tuple[Area, ...]
    data_roots: tuple[Place, ...] = ()
    # the areas case-folded, computed once: an import checks every row against all of them
    folded_areas: tuple[_FoldedArea, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "folded_areas", tuple(_FoldedArea.of(area) for area in self.areas))


@dataclass(frozen=True)
class _FoldedArea:
    scheme: str
    path: str
    prefix: str  # what the paths under it start with
    area: Area

    @staticmethod
    def of(area: Area) -> _FoldedArea:
        folded = area.place.folded()
        return _FoldedArea(folded.scheme, folded.path, _prefix(folded.path), area)


def _prefix(path: str) -> str:
    return path if path == "/" else path + "/"


@dataclass(frozen=True)
class Decision:
    place: Place | None = None  # where the data is, when accepted
    relative: str | None = None  # the normal path under the storage root, for a relative location
    refused: str | None = None  # why not: a phrase that follows "location '<text>' "

    def problem(self, location: str) -> str | None:
        return None if self.refused is None else f"location {shown(location)} {self.refused}"


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


def _absolute(scheme: str, authority: str, path: str) -> Place:
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
    return _absolute(scheme, authority, decoded)


def parse_absolute(text: str) -> Place:
    """An absolute local path or a URI as a Place (data roots); Refused otherwise."""
    if is_uri(text):
        return parse_uri(text)
    if not text.startswith("/"):
        raise Refused("is neither an absolute path nor a URI")
    if "\x00" in text:
        raise Refused("contains a NUL character")
    return _absolute("file", "", text)


def inside(outer: Place, inner: Place, strict: bool = False) -> bool:
    """Whether `inner` is `outer` or lies under it (strictly under it when `strict`), by whole segments."""
    if outer.scheme != inner.scheme or outer.authority != inner.authority:
        return False
    if inner.path == outer.path:
        return not strict
    return outer.path == "/" or inner.path.startswith(outer.path + "/")


def _overlap_folded(place: Place, folded_areas: Iterable[_FoldedArea]) -> str | None:
    # inlined rather than calling inside(): this runs for every row of an import. The authority is
    # not compared: one bucket or host has many spellings (credentials, endpoints, account
    # suffixes), so an area's path is off limits under every authority of its scheme
    path = place.path.casefold()
    prefix = _prefix(path)
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
    return _overlap_folded(place, (_FoldedArea.of(a) for a in areas))


def _not_in_a_data_root(place: Place, roots: tuple[Place, ...]) -> str | None:
    if any(inside(root, place, strict=True) for root in roots):
        return None
    if place in roots:
        return "names a catalog.data_roots entry itself, not a file under it"
    if not roots:
        return "is absolute, and absolute locations need catalog.data_roots (none is configured)"
    return "is not under any catalog.data_roots entry"


def decide(location: str, rules: LocationRules) -> Decision:
    """Accept a record's location (where it is) or refuse it (why); see the module doc."""
    text = location.strip()
    if not text:
        return Decision(refused="is empty")
    if "\x00" in text:
        return Decision(refused="contains a NUL character")
    relative: str | None = None
    if is_uri(text) or text.startswith("/"):
        try:
            place = parse_absolute(text)
        except Refused as exc:
            return Decision(refused=str(exc))
    else:
        segments = normal_segments(text, absolute=False)
        if segments is None:
            return Decision(refused="is outside the storage root")
        if not segments:
            return Decision(refused="names the storage root itself, not a file under it")
        relative = "/".join(segments)
        place = rules.storage_root.child(relative)
    reason = _overlap_folded(place, rules.folded_areas)
    if reason is None and relative is None:
        reason = _not_in_a_data_root(place, rules.data_roots)
    if reason is not None:
        return Decision(refused=reason)
    return Decision(place=place, relative=relative)


def decide_real(real: Place, rules: LocationRules) -> str | None:
    """For a local file whose directories' symlinks are resolved (`real`), checked against rules
    whose local places are resolved too: None when it is still catalog data, else why not."""
    reason = _overlap_folded(real, rules.folded_areas)
    if reason is not None:
        return f"resolves through a symlink to {real.text}, which {reason}"
    if inside(rules.storage_root, real, strict=True) or any(inside(r, real, strict=True) for r in rules.data_roots):
        return None
    return f"resolves through a symlink to {real.text}, outside the storage root and every catalog.data_roots entry"


def check_location(location: str | None, rules: LocationRules, where: str) -> None:
    """InvalidInput naming the record (`where`) and the location when it is refused."""
    if location is None:
        return
    problem = decide(location, rules).problem(location)
    if problem is not None:
        raise InvalidInput(f"{where}: {problem}")


def check_data_root(root: Place, areas: Iterable[Area]) -> str | None:
    """Why a configured data root is not acceptable (it overlaps one of tidekeep's areas), or None."""
    return overlap(root, areas)


__all__ = [
    "Area", "Decision", "LocationRules", "Place", "Refused", "check_data_root", "check_location", "decide",
    "decide_real", "inside", "is_uri", "normal_segments", "overlap", "parse_absolute", "parse_uri", "shown",
]
