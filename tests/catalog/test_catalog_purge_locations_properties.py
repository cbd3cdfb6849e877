"""The location rules (tidekeep.catalog.locations.decide) against a brute-force oracle: locations
built from segments that include "", ".", "..", tidekeep's area names, names that only share a
prefix with them or with a data root (streams2, rootX), other case, percent-escapes, plain paths,
file:// and s3:// URIs. The oracle normalises with posixpath and compares whole ancestor chains, so
it shares no code with the implementation."""

from __future__ import annotations

import posixpath
from urllib.parse import unquote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidekeep.catalog.locations import (
    Area,
    LocationRules,
    Place,
    Refused,
    decide,
    decide_real,
    parse_absolute,
)

LOCAL_ROOT = "/data/root"
AREA_PATHS = {  # (scheme, authority, path) -> what
    ("file", "", "/data/root/streams"): "stream data",
    ("file", "", "/data/root/archives"): "log archives",
    ("file", "", "/data/root/search-results"): "search results",
    ("file", "", "/data/meta.db"): "metadata database",
    ("file", "", "/data/meta.db-wal"): "metadata database",
    ("file", "", "/data/tidekeep.yaml"): "workspace settings file",
}
S3_AREAS = {("s3", "bkt", "/tk/streams"): "stream data", ("s3", "bkt", "/tk/archives"): "log archives",
            ("gs", "bkt", "/g/streams"): "stream data"}
DATA_ROOTS = [("file", "", "/data/ext"), ("file", "", "/data/root/catalog"), ("file", "", "/data/r"),
              ("s3", "bkt", "/ext"), ("s3", "other", "/")]

SEGMENTS = ["", ".", "..", "streams", "streams2", "Streams", "STREAMS", "archives", "search-results",
            "search-results.old", "catalog", "root", "rootX", "data", "ext", "ext2", "r", "tk", "meta.db",
            "meta.db-wal", "meta.db-walX", "tidekeep.yaml", "x.dat", "%73treams", "%2e%2e", "a%2Fb"]
PREFIXES = ["", "", "/", "//", "file://", "file:///", "s3://bkt", "s3://bkt/", "S3://bkt/", "s3://other/",
            "s3://BKT/", "file://host/", "/data/", "/data/ext/", "/data/root/", "file:///data/ext/",
            "s3://bkt/ext/", "s3://bkt/tk/", "/data/r/", "/data/rootX/", "catalog/", "local:///data/",
            "local://h/", "s3://u:p@bkt/tk/", "s3://other/tk/", "gcs://bkt/"]


def rules_of(storage_s3: bool, roots: list[tuple[str, str, str]]) -> LocationRules:
    storage = Place("s3", "bkt", "/tk") if storage_s3 else Place("file", "", LOCAL_ROOT)
    areas = {**AREA_PATHS, **S3_AREAS} if storage_s3 else AREA_PATHS
    return LocationRules(storage, tuple(Area(Place(*k), v) for k, v in areas.items()),
                         tuple(Place(*r) for r in roots))


def ancestors(path: str) -> set[str]:
    """The path and every directory above it, by repeated dirname."""
    out = {path}
    while path != "/":
        path = posixpath.dirname(path)
        out.add(path)
    return out


def oracle(text: str, rules: LocationRules) -> tuple[str, tuple[str, str, str] | None]:
    """("accepted", place) or (a short reason kind, None), computed the slow, obvious way."""
    text = text.strip()
    if not text:
        return "empty", None
    scheme_part, sep, rest = text.partition("://")
    is_uri = bool(sep) and scheme_part[:1].isalpha() and all(c.isalnum() or c in "+.-" for c in scheme_part)
    relative = False
    if is_uri:
        authority, _, path = rest.partition("/")
        scheme = {"local": "file", "gcs": "gs"}.get(scheme_part.lower(), scheme_part.lower())
        if "%" in authority:
            return "escaped host", None
        if scheme == "file" and authority:
            return "host", None
        path = unquote("/" + path)
    elif text.startswith("/"):
        scheme, authority, path = "file", "", text
    else:
        normal = posixpath.normpath(text)
        if normal == ".." or normal.startswith("../"):
            return "outside", None
        if normal == ".":
            return "root", None
        root = rules.storage_root
        scheme, authority, path, relative = root.scheme, root.authority, root.path + "/" + normal, True
    path = posixpath.normpath(path)
    if path.startswith("//"):
        path = "/" + path.lstrip("/")
    folded = (scheme.casefold(), authority.casefold(), path.casefold())
    for area in rules.areas:
        mine = (area.place.scheme.casefold(), area.place.authority.casefold(), area.place.path.casefold())
        # the scheme, not the authority: a bucket has many spellings
        if mine[0] == folded[0] and (mine[2] in ancestors(folded[2]) or folded[2] in ancestors(mine[2])):
            return "area", None
    if not relative:
        strictly_under = [r for r in rules.data_roots if (r.scheme, r.authority) == (scheme, authority)
                          and r.path in ancestors(path) - {path}]
        if not strictly_under:
            return "not in a data root", None
    return "accepted", (scheme, authority, path)


REASON_WORDS = {"empty": "is empty", "host": "names a host", "escaped host": "percent-escape in its host",
                "outside": "is outside the storage root",
                "root": "names the storage root itself", "area": "tidekeep's",
                "not in a data root": "catalog.data_roots"}

locations = st.builds(
    lambda prefix, segments, slash, pad: pad + prefix + "/".join(segments) + ("/" if slash else "") + pad,
    st.sampled_from(PREFIXES), st.lists(st.sampled_from(SEGMENTS), max_size=7), st.booleans(),
    st.sampled_from(["", " "]))


@settings(max_examples=3000, deadline=None)
@given(locations, st.booleans(), st.lists(st.sampled_from(DATA_ROOTS), unique=True, max_size=4))
def test_decide_agrees_with_the_oracle(location: str, storage_s3: bool, roots: list[tuple[str, str, str]]) -> None:
    rules = rules_of(storage_s3, roots)
    decision = decide(location, rules)
    verdict, place = oracle(location, rules)
    if verdict == "accepted":
        assert decision.refused is None, (location, decision.refused)
        assert decision.place is not None and (decision.place.scheme, decision.place.authority,
                                               decision.place.path) == place
        # a decision on the normal form is the same decision: checking and deleting agree
        again = decide(decision.relative if decision.relative is not None else decision.place.uri, rules)
        assert again.place == decision.place
    else:
        assert decision.place is None and decision.refused is not None, (location, verdict)
        assert REASON_WORDS[verdict] in decision.refused, (location, decision.refused)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(SEGMENTS[3:]), min_size=1, max_size=4))
def test_a_name_that_only_shares_a_prefix_with_a_data_root_is_refused(tail: list[str]) -> None:
    rules = rules_of(False, [("file", "", "/data/r")])
    for sibling in ("/data/rootX", "/data/r2", "/data/r.old", "/data/r-"):
        assert decide(sibling + "/" + "/".join(tail), rules).place is None
    assert decide("/data/r/" + "/".join(tail), rules).place is not None


def test_examples_and_their_messages() -> None:
    rules = rules_of(False, [("file", "", "/data/ext"), ("s3", "bkt", "/ext")])
    assert decide("catalog/a/b.dat", rules).relative == "catalog/a/b.dat"
    assert decide("catalog/./a/../b.dat", rules).relative == "catalog/b.dat"
    assert decide("/data/ext/x/../y.dat", rules).place == Place("file", "", "/data/ext/y.dat")
    assert decide("file:///data/ext/%79.dat", rules).place == Place("file", "", "/data/ext/y.dat")
    assert decide("S3://bkt/ext//a/", rules).place == Place("s3", "bkt", "/ext/a")
    assert decide("local:///data/ext/a", rules).place == Place("file", "", "/data/ext/a")

    def problem(location: str) -> str | None:
        return decide(location, rules).problem(location)

    for bad in ("../x", "a/../../x", ".."):
        assert problem(bad) == f"location {bad!r} is outside the storage root"
    for root in (".", "a/..", "./"):
        assert problem(root) == f"location {root!r} names the storage root itself, not a file under it"
    assert problem("  ") == "location '  ' is empty"
    assert problem("streams/s/x-1/0.parquet") == (
        "location 'streams/s/x-1/0.parquet' lies inside tidekeep's stream data (/data/root/streams)")
    assert problem("/data") == "location '/data' contains tidekeep's stream data (/data/root/streams)"
    assert problem("file:///data/root/%73treams/a") == (
        "location 'file:///data/root/%73treams/a' lies inside tidekeep's stream data (/data/root/streams)")
    assert problem("local:///data/root/streams/a") == (
        "location 'local:///data/root/streams/a' lies inside tidekeep's stream data (/data/root/streams)")
    assert problem("/data/meta.db-wal") == (
        "location '/data/meta.db-wal' lies inside tidekeep's metadata database (/data/meta.db-wal)")
    assert problem("/data/elsewhere/x") == "location '/data/elsewhere/x' is not under any catalog.data_roots entry"
    assert problem("/data/ext") == "location '/data/ext' names a catalog.data_roots entry itself, not a file under it"
    assert problem("s3://bkt/tk/x") == "location 's3://bkt/tk/x' is not under any catalog.data_roots entry"
    assert problem("s3://bkt/ext/x?versionId=1") == (
        "location 's3://bkt/ext/x?versionId=1' has a query or fragment, which a location URI may not carry")
    assert problem("file://host/data/ext/x") == (
        "location 'file://host/data/ext/x' names a host: a file URI must be file:///<absolute path>")
    assert problem("/data/ext/a\x00b") == "location '/data/ext/a\\x00b' contains a NUL character"
    assert problem("file:///data/ext/a%00b") == "location 'file:///data/ext/a%00b' contains a NUL character"
    assert problem("file:///data/ext/%ff") == "location 'file:///data/ext/%ff' is not valid percent-encoded UTF-8"
    assert problem("s3://b%6bt/ext/x") == "location 's3://b%6bt/ext/x' has a percent-escape in its host or bucket"
    on_s3 = rules_of(True, [("s3", "bkt", "/ext")])
    spelled = "s3://key:secret@bkt/tk/streams/a"  # another spelling of the storage bucket
    assert decide(spelled, on_s3).problem(spelled) == (
        f"location {spelled!r} lies inside tidekeep's stream data (s3://bkt/tk/streams)")
    assert decide("gcs://bkt/g/streams/a", on_s3).refused == "lies inside tidekeep's stream data (gs://bkt/g/streams)"
    none = rules_of(False, [])
    assert decide("/data/ext/x", none).problem("/data/ext/x") == (
        "location '/data/ext/x' is absolute, and absolute locations need catalog.data_roots (none is configured)")
    long = "/data/elsewhere/" + "x" * 300
    assert decide(long, rules).problem(long) == (
        f"location {long[:200] + '...'!r} is not under any catalog.data_roots entry")


def test_a_resolved_path_must_still_be_catalog_data() -> None:
    rules = rules_of(False, [("file", "", "/data/ext")])
    assert decide_real(Place("file", "", "/data/ext/a/b"), rules) is None
    assert decide_real(Place("file", "", "/data/root/catalog/b"), rules) is None
    assert decide_real(Place("file", "", "/data/root/streams/s/0.parquet"), rules) == (
        "resolves through a symlink to /data/root/streams/s/0.parquet, which lies inside tidekeep's stream data "
        "(/data/root/streams)")
    assert decide_real(Place("file", "", "/etc/passwd"), rules) == (
        "resolves through a symlink to /etc/passwd, outside the storage root and every catalog.data_roots entry")


@pytest.mark.parametrize(("text", "reason"), [
    ("relative/x", "is neither an absolute path nor a URI"), ("", "is neither an absolute path nor a URI"),
    ("s3://b/x#f", "has a query or fragment"), ("/a\udc80", "is not valid UTF-8 text"),
])
def test_parse_absolute_refuses(text: str, reason: str) -> None:
    with pytest.raises(Refused, match=reason):
        parse_absolute(text)


# ---- which data root's options open a place's store ----------------------------------------------
OPTION_ROOTS = [("s3", "bkt", "/"), ("s3", "bkt", "/ext"), ("s3", "bkt", "/ext/deep"), ("s3", "bkt", "/extX"),
                ("s3", "other", "/ext"), ("gs", "bkt", "/ext")]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(OPTION_ROOTS), st.sampled_from(["", "region=a", "endpoint_override=h:9"])),
                unique_by=lambda pair: pair[0], max_size=6),
       st.sampled_from(OPTION_ROOTS), st.lists(st.sampled_from(["ext", "deep", "extX", "a.dat"]), max_size=3))
def test_the_options_are_those_of_the_innermost_root_holding_the_place(roots, base, tail) -> None:
    """Oracle: among the roots the place lies strictly under (same scheme and authority, whole
    segments of the path), the one with the most segments; none holds it: no options."""
    from tidekeep.catalog.locations import options_for

    scheme, authority, path = base
    place = Place(scheme, authority, posixpath.join(path, *tail) if tail else path)
    rooted = [(Place(*root), options) for root, options in roots]

    def segments(text: str) -> list[str]:
        return [s for s in text.split("/") if s]

    holding = [(len(segments(root.path)), options) for root, options in rooted
               if (root.scheme, root.authority) == (place.scheme, place.authority)
               and len(segments(place.path)) > len(segments(root.path))
               and segments(place.path)[:len(segments(root.path))] == segments(root.path)]
    assert options_for(place, rooted) == (max(holding)[1] if holding else "")
