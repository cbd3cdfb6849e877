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
Containment is by whole segments: `/data/rootX` is not inside `/data/root`. That normal form and
the overlap check are tidekeep/places.py's, which the settings check `catalog.data_roots` with too;
this module adds the catalog's rules on top and offers the places' names to its callers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..errors import InvalidInput
from ..places import (
    SCHEME_ALIASES,
    SHOWN,
    Area,
    FoldedArea,
    Place,
    Refused,
    inside,
    is_uri,
    normal_segments,
    overlap,
    overlap_folded,
    parse_absolute,
    parse_uri,
    shown,
)


@dataclass(frozen=True)
class LocationRules:
    storage_root: Place
    areas: tuple[Area, ...]
    data_roots: tuple[Place, ...] = ()
    # the areas case-folded, computed once: an import checks every row against all of them
    folded_areas: tuple[FoldedArea, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "folded_areas", tuple(FoldedArea.of(area) for area in self.areas))


@dataclass(frozen=True)
class Decision:
    place: Place | None = None  # where the data is, when accepted
    relative: str | None = None  # the normal path under the storage root, for a relative location
    refused: str | None = None  # why not: a phrase that follows "location '<text>' "

    def problem(self, location: str) -> str | None:
        return None if self.refused is None else f"location {shown(location)} {self.refused}"


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
    reason = overlap_folded(place, rules.folded_areas)
    if reason is None and relative is None:
        reason = _not_in_a_data_root(place, rules.data_roots)
    if reason is not None:
        return Decision(refused=reason)
    return Decision(place=place, relative=relative)


def decide_real(real: Place, rules: LocationRules) -> str | None:
    """For a local file whose directories' symlinks are resolved (`real`), checked against rules
    whose local places are resolved too: None when it is still catalog data, else why not."""
    reason = overlap_folded(real, rules.folded_areas)
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


def options_for(place: Place, roots: Iterable[tuple[Place, str]]) -> str:
    """The pyarrow options (a URI query, "" for none) to open the store of `place` with: those of
    the innermost data root holding it. A location carries none of its own (a query in one is
    refused): how a store is reached is the operator's setting, not a record's."""
    holding = [(root, options) for root, options in roots if inside(root, place, strict=True)]
    return max(holding, key=lambda pair: len(pair[0].path), default=(place, ""))[1]


def check_data_root(root: Place, areas: Iterable[Area]) -> str | None:
    """Why a configured data root is not acceptable (it overlaps one of tidekeep's areas), or None."""
    return overlap(root, areas)


__all__ = [
    "SCHEME_ALIASES", "SHOWN", "Area", "Decision", "LocationRules", "Place", "Refused", "check_data_root",
    "check_location", "decide", "decide_real", "inside", "is_uri", "normal_segments", "options_for", "overlap",
    "parse_absolute",
    "parse_uri", "shown",
]
