"""Search queries: the compiled pyarrow matcher agrees with a brute-force wildcard matcher written
here (CLP's `*`, `?`, `\\` escapes, implicit `*...*`, RE2 simple case folding for ignore_case), and
bad queries are typed errors naming the problem."""

from __future__ import annotations

import re
from functools import cache

import pyarrow as pa
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tidekeep.archives.query import MAX_QUERY_LENGTH, Kind, Matcher, compile_query, regex_literals, tokenize
from tidekeep.errors import InvalidInput, InvalidRegex

# literals chosen to exercise LIKE's metacharacters (% _ \), RE2's metacharacters, NUL, line
# breaks, and non-ASCII case folding: K/k/KELVIN SIGN, s/S/LONG S, ß/CAPITAL SHARP S, é/É
ALPHABET = "abAB%_\\*?.()|[]{}^$+\x00\n kK\u212asS\u017f\u00df\u1e9e\u00e9\u00c9\u65e5"
STAR, ONE = "STAR", "ONE"


def fold(char: str) -> str:
    """Unicode simple case folding of one character (what RE2 compares under ignore_case):
    the full folding when it is one character, else the lowercase (ß stays ß, ẞ becomes ß)."""
    folded = char.casefold()
    return folded if len(folded) == 1 else char.lower()


def oracle_tokens(query: str) -> list[str]:
    """The query as tokens, written independently of tokenize(): STAR, ONE or ('lit', char)."""
    out: list[str] = []
    i = 0
    while i < len(query):
        c = query[i]
        if c == "\\":
            if i + 1 == len(query):
                raise ValueError("trailing backslash")
            out.append("L" + query[i + 1])
            i += 2
            continue
        out.append(STAR if c == "*" else ONE if c == "?" else "L" + c)
        i += 1
    return out


def wildcard_oracle(query: str, message: str, ignore_case: bool = False) -> bool:
    """Brute force: does `*query*` match the whole message (DP over token and character positions)?"""
    tokens = [STAR, *oracle_tokens(query), STAR]
    same = (lambda a, b: fold(a) == fold(b)) if ignore_case else (lambda a, b: a == b)

    @cache
    def match(t: int, m: int) -> bool:
        if t == len(tokens):
            return m == len(message)
        token = tokens[t]
        if token == STAR:
            return match(t + 1, m) or (m < len(message) and match(t, m + 1))
        if m == len(message):
            return False
        if token == ONE:
            return match(t + 1, m + 1)
        return same(token[1], message[m]) and match(t + 1, m + 1)

    return match(0, 0)


def apply(query: str, messages: list[str], **kwargs: bool) -> list[bool]:
    matcher = compile_query(query, **kwargs)
    return matcher.mask(pa.array(messages, pa.string())).to_pylist()


def escape_literal(char: str, always: bool) -> str:
    return "\\" + char if char in "*?\\" or always else char


@st.composite
def queries(draw: st.DrawFn) -> str:
    """Random wildcard queries: literals (escaped when needed, sometimes needlessly), `*` and `?`."""
    parts = draw(st.lists(st.one_of(
        st.tuples(st.just("lit"), st.sampled_from(ALPHABET), st.booleans()),
        st.tuples(st.just("star"), st.just(""), st.just(False)),
        st.tuples(st.just("one"), st.just(""), st.just(False))), min_size=1, max_size=6))
    return "".join("*" if kind == "star" else "?" if kind == "one" else escape_literal(c, always)
                   for kind, c, always in parts)


messages = st.lists(st.text(alphabet=ALPHABET, max_size=10), min_size=1, max_size=12)


@settings(max_examples=400, deadline=None)
@given(queries(), messages, st.booleans())
def test_wildcard_matcher_agrees_with_the_brute_force_oracle(query: str, texts: list[str], ignore_case: bool) -> None:
    assert apply(query, texts, ignore_case=ignore_case) == [wildcard_oracle(query, t, ignore_case) for t in texts]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=4), messages, st.booleans())
def test_a_query_taken_from_a_message_finds_it(chars: list[str], texts: list[str], ignore_case: bool) -> None:
    # substrings that do occur: the oracle alone could be vacuously false on random text
    text = "xx" + "".join(chars) + "yy"
    query = "".join(escape_literal(c, False) for c in chars)
    assert apply(query, [text, *texts], ignore_case=ignore_case)[0] is True
    assert apply(query, texts, ignore_case=ignore_case) == [wildcard_oracle(query, t, ignore_case) for t in texts]


# a regex subset on which Python's re and RE2 agree: literals, classes, ., quantifiers, groups,
# alternation and a leading ^ ($ differs: Python's also matches before a final line break)
regex_atoms = st.one_of(st.sampled_from(ALPHABET[:4] + " .\n").map(re.escape), st.just("."), st.just("[ab]"),
                        st.just("[^a]"))


@st.composite
def regexes(draw: st.DrawFn) -> str:
    pieces = draw(st.lists(st.tuples(regex_atoms, st.sampled_from(["", "*", "+", "?", "{1,2}"])), min_size=1,
                           max_size=4))
    body = "".join(a + q for a, q in pieces)
    if draw(st.booleans()):
        body = f"({body}|{draw(regex_atoms)})"
    return ("^" if draw(st.booleans()) else "") + body


@settings(max_examples=300, deadline=None)
@given(regexes(), st.lists(st.text(alphabet="abAB .\n%", max_size=8), min_size=1, max_size=10), st.booleans())
def test_regex_has_search_semantics(pattern: str, texts: list[str], ignore_case: bool) -> None:
    flags = re.IGNORECASE if ignore_case else 0
    expected = [re.search(pattern, t, flags) is not None for t in texts]
    assert apply(pattern, texts, regex=True, ignore_case=ignore_case) == expected


def test_wildcards_compile_to_re2() -> None:
    assert compile_query("error") == Matcher(Kind.WILDCARD, "(?s)error", False, ("error",))
    assert compile_query("a\\*b").pattern == "(?s)a\\*b"
    assert compile_query("***").kind is Kind.ALL and compile_query("*", ignore_case=True).kind is Kind.ALL
    assert compile_query("*a**b*?").pattern == "(?s)a.*b.*."
    assert compile_query("50%_?").pattern == "(?s)50%_."
    assert compile_query("a\\\\?").pattern == "(?s)a\\\\."
    assert compile_query("(x|y)[1]{2}^$+.").pattern == "(?s)\\(x\\|y\\)\\[1\\]\\{2\\}\\^\\$\\+\\."
    assert compile_query("^GET", regex=True) == Matcher(Kind.REGEX, "^GET", False, ("GET",))
    # the literal runs between wildcards, escapes resolved (what an encoded search rules rows out by)
    assert compile_query("*a\\*b?c*d\\\\").literals == ("a*b", "c", "d\\")
    assert compile_query("*").literals == ()


@settings(max_examples=500, deadline=None)
@given(regexes(), st.lists(st.text(alphabet="abAB .\n%", max_size=8), min_size=1, max_size=10), st.booleans())
def test_every_regex_match_holds_the_regex_literals(pattern: str, texts: list[str], ignore_case: bool) -> None:
    literals = regex_literals(pattern)
    for text in texts:
        if re.search(pattern, text, re.IGNORECASE if ignore_case else 0):
            folded = text.lower() if ignore_case else text
            assert all((lit.lower() if ignore_case else lit) in folded for lit in literals), (pattern, text)


@pytest.mark.parametrize(("pattern", "literals"), [
    ('latency_ms":[0-9]{3,}', ('latency_ms":',)), ("^GET /x$", ("GET /x",)), ("ab|cd", ()), ("(a|b)c", ("c",)),
    ("ab*c", ("a", "c")), ("ab+?c", ("a", "c")), ("a{,3}bc", ("bc",)), (r"x\.y\d+z", ("x.y", "z")),
    ("[]a]b", ("b",)), ("[^]a]b", ("b",)), ("(?i)abc", ()), ("x(?i:abc)y", ()), ("(?:ab)c", ("c",)),
    ("a.b", ("a", "b")), ("(unclosed", ()), (r"\Qa.b\E", ("a", "b")),
    # a POSIX class inside a class: its ']' does not end the class
    ("x[[:digit:]]y", ("x", "y")), ("a[[:alpha:][:digit:]]b", ("a", "b")), ("[^[:space:]]z", ("z",)),
    ("[[]x", ("x",)), ("[[:]x", ("x",)), ("[a[:]]x", ("]x",)),
])
def test_regex_literals(pattern: str, literals: tuple[str, ...]) -> None:
    assert regex_literals(pattern) == literals


def test_worked_examples() -> None:
    lines = ["GET /index.html 200", "POST /api 500", "get /x 404", "100% done", "file_1.log", "a*b literal",
             "axxb", "first line\nsecond 500", ""]
    assert apply("GET", lines) == [True, False, False, False, False, False, False, False, False]
    assert apply("GET", lines, ignore_case=True) == [True, False, True, False, False, False, False, False, False]
    assert apply("/* 500", lines) == [False, True, False, False, False, False, False, False, False]
    assert apply("% done", lines) == [False, False, False, True, False, False, False, False, False]
    assert apply("file?1", lines) == [False, False, False, False, True, False, False, False, False]
    assert apply("a\\*b", lines) == [False, False, False, False, False, True, False, False, False]
    assert apply("a*b", lines) == [False, False, False, False, False, True, True, False, False]
    assert apply("line?second", lines)[7] is True  # ? and * cross line breaks
    assert apply("*", lines) == [True] * len(lines)  # even the empty message
    assert apply("?", lines)[-1] is False
    assert apply(r"\d{3}$", lines, regex=True) == [True, True, True, False, False, False, False, True, False]
    assert apply("kelvin", ["\u212aELVIN"], ignore_case=True) == [True]
    assert apply("stra\u00dfe", ["STRA\u1e9eE", "STRASSE"], ignore_case=True) == [True, False]


@pytest.mark.parametrize(("query", "regex", "message"), [
    ("", False, "it is empty"),
    ("", True, "it is empty"),
    ("abc\\", False, "ends with a lone '\\'"),
    ("(", True, "missing ): ("),
    ("a{2,1}", True, "invalid repetition size"),
    ("x\\", True, "trailing \\"),
])
def test_bad_queries_are_invalid_input_naming_the_problem(query: str, regex: bool, message: str) -> None:
    with pytest.raises(InvalidInput) as info:
        compile_query(query, regex=regex)
    assert message in str(info.value)
    assert "\n" not in str(info.value)
    if regex and query:
        assert "invalid regex query" in str(info.value)


@pytest.mark.parametrize(("query", "message"), [
    ("(a)\\1", "invalid escape sequence: \\1"),
    ("a(?=b)", "invalid perl operator: (?="),
    ("(?<!a)b", "invalid perl operator: (?<!"),
    ("a++", "bad repetition operator: ++"),
    ("(?>a)", "invalid perl operator: (?>"),
])
def test_regex_queries_that_need_backtracking_are_refused(query: str, message: str) -> None:
    with pytest.raises(InvalidRegex) as info:
        compile_query(query, regex=True)
    assert str(info.value) == f"invalid regex query {query!r}: {message}"


@pytest.mark.timeout(10)
def test_no_query_backtracks() -> None:
    """RE2 is linear-time: patterns that take a backtracking engine exponential (or high-polynomial)
    time over a long message answer at once, with the right answer."""
    messages = pa.array(["a" * 5000 + "!", "a" * 5000, "x" + "ab" * 2000])
    assert compile_query("(a+)+$", regex=True).mask(messages).to_pylist() == [False, True, False]
    assert compile_query("^(a|aa)+$", regex=True).mask(messages).to_pylist() == [False, True, False]
    assert compile_query("(.*a){30}!", regex=True).mask(messages).to_pylist() == [True, False, False]
    assert compile_query("a*a*a*a*a*a*a*a*a*a*a*a*a*b").mask(messages).to_pylist() == [False, False, True]
    assert compile_query("a*a*a*a*a*a*a*a*a*a*a*a*a*c").mask(messages).to_pylist() == [False, False, False]


@pytest.mark.parametrize("regex", [False, True])
def test_queries_have_a_maximum_length(regex: bool) -> None:
    longest = "a" * MAX_QUERY_LENGTH
    assert compile_query(longest, regex=regex).mask(pa.array([longest, longest[1:]])).to_pylist() == [True, False]
    with pytest.raises(InvalidInput) as info:
        compile_query(longest + "a", regex=regex)
    assert str(info.value) == f"invalid search query: {MAX_QUERY_LENGTH + 1} characters, above the maximum of 4096"
    assert MAX_QUERY_LENGTH == 4096  # documented in docs/archives-search.md


def test_tokenize_escapes_any_character() -> None:
    assert tokenize("\\a\\*") == ["a", "*"]
    assert [t if isinstance(t, str) else "W" for t in tokenize("*?")] == ["W", "W"]


# ---- time ranges (timerange.py) --------------------------------------------------------------------

from tidekeep.archives.timerange import MAX_MS, TimeRange, parse_range, parse_time  # noqa: E402
from tidekeep.units import iso_utc  # noqa: E402


@pytest.mark.parametrize(("text", "expected"), [
    ("2024-06-01T12:00:00Z", 1_717_243_200_000),
    ("2024-06-01T12:00:00", 1_717_243_200_000),  # no zone: UTC
    ("2024-06-01 12:00:00.250", 1_717_243_200_250),
    ("2024-06-01T14:00:00+02:00", 1_717_243_200_000),
    ("2024-06-01T08:00:00-04:00", 1_717_243_200_000),
    ("2024-06-01", 1_717_200_000_000),
    ("1717243200000", 1_717_243_200_000),
    (" 0 ", 0),
    (1_717_243_200_000, 1_717_243_200_000),
    ("9999-12-31T23:59:59.999Z", MAX_MS),
    ("1970-01-01T00:00:00Z", 0),
])
def test_times_parse_to_epoch_ms(text: str | int, expected: int) -> None:
    assert parse_time(text, "--begin") == expected


@pytest.mark.parametrize(("value", "flag", "message"), [
    ("1969-12-31T23:59:59.999Z", "--begin", "before 1970"),
    ("1970-01-01T00:30:00+01:00", "--end", "before 1970"),
    ("-1", "--begin", "before 1970"),
    (-5, "--end", "before 1970"),
    (MAX_MS + 1, "--end", "after 9999"),
    ("253402300800000", "--begin", "after 9999"),
    ("yesterday", "--end", "expected epoch milliseconds or an ISO-8601 time"),
    ("2024-13-01", "--begin", "expected epoch milliseconds or an ISO-8601 time"),
    ("", "--begin", "expected epoch milliseconds or an ISO-8601 time"),
    (1.5, "--begin", "expected epoch milliseconds"),
    (True, "--end", "expected epoch milliseconds"),
])
def test_bad_times_name_the_flag(value: object, flag: str, message: str) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_time(value, flag)  # type: ignore[arg-type]
    assert str(info.value).startswith(f"invalid {flag} ")
    assert message in str(info.value)


def test_a_backwards_range_names_begin_and_end() -> None:
    with pytest.raises(InvalidInput, match=r"invalid --begin '2024-06-02': it is after --end '2024-06-01'"):
        parse_range("2024-06-02", "2024-06-01")
    assert parse_range("2024-06-01", "2024-06-01") == TimeRange(1_717_200_000_000, 1_717_200_000_000)
    assert parse_range(None, None) == TimeRange() and not TimeRange().bounded


def test_sub_millisecond_bounds_round_inward() -> None:
    assert parse_range("1970-01-01T00:00:00.0015", "1970-01-01T00:00:00.0025") == TimeRange(2, 2)
    assert parse_range("1970-01-01T00:00:00.001", "1970-01-01T00:00:00.001") == TimeRange(1, 1)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, MAX_MS))
def test_iso_utc_round_trips(ms: int) -> None:
    text = iso_utc(ms)
    assert text is not None
    assert parse_time(text, "--begin", round_up=True) == ms == parse_time(text, "--end")


bounds = st.one_of(st.none(), st.integers(0, 30))


@settings(max_examples=400, deadline=None)
@given(bounds, bounds, st.one_of(st.none(), st.tuples(st.integers(0, 30), st.integers(0, 30)).map(sorted)))
def test_overlap_means_some_contained_timestamp(begin: int | None, end: int | None, archive: list[int] | None) -> None:
    """The archive pre-selection (CLP's inclusive overlap) never drops an archive that holds a
    message in range: brute force over every timestamp the archive could hold."""
    assume(begin is None or end is None or begin <= end)  # parse_range refuses backwards ranges
    time_range = TimeRange(begin, end)
    if archive is None:
        assert time_range.overlaps(None, None) == (begin is None and end is None) == time_range.contains(None)
        return
    low, high = archive
    assert time_range.overlaps(low, high) == any(time_range.contains(t) for t in range(low, high + 1))
