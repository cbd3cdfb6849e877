"""The expression syntax: the text parser and to_text, Stroom's JSON form, dates, validation."""

from __future__ import annotations

import calendar
import re
from datetime import UTC, datetime, timedelta

import pytest
import re2
from hypothesis import given, settings
from hypothesis import strategies as st
from test_catalog_expressions_strategies import expressions, terms

from tidekeep.catalog.expressions import (
    MATCH_ALL,
    Condition,
    Op,
    Operator,
    Term,
    from_json,
    normalize,
    parse,
    referenced_columns,
    referenced_dictionaries,
    resolve_date,
    to_json,
    to_text,
    validate,
)
from tidekeep.catalog.expressions.dates import MAX_MS, MIN_MS
from tidekeep.catalog.expressions.regex import parse_regex, stdlib_pattern
from tidekeep.errors import InvalidInput, InvalidRegex

C = Condition


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


# ---- the text syntax ---------------------------------------------------------------------------


def test_issue_example_parses_to_stroom_terms() -> None:
    expr = parse('feed = "INTERNAL_*" and type in ("Raw Events", "Events")')
    assert expr == Operator(
        Op.AND, (Term("Feed", C.EQUALS, "INTERNAL_*"), Term("Type", C.IN, "Raw Events,Events"))
    )


def test_precedence_not_over_and_over_or() -> None:
    a, b, c = (Term("Feed", C.EQUALS, x) for x in "abc")
    assert parse('feed = "a" or feed = "b" and feed = "c"') == Operator(Op.OR, (a, Operator(Op.AND, (b, c))))
    assert parse('not feed = "a" and feed = "b"') == Operator(Op.AND, (Operator(Op.NOT, (a,)), b))
    assert parse('NOT (feed = "a" OR feed = "b") And feed = "c"') == Operator(
        Op.AND, (Operator(Op.NOT, (Operator(Op.OR, (a, b)),)), c)
    )
    assert parse('((feed = "a"))') == a


@pytest.mark.parametrize(
    ("text", "term"),
    [
        ('type != "Events"', Term("Type", C.NOT_EQUALS, "Events")),
        ('pipeline contains "x y"', Term("Pipeline", C.CONTAINS, "x y")),
        ('feed starts with "A"', Term("Feed", C.STARTS_WITH, "A")),
        ('feed ENDS WITH "_LOGS"', Term("Feed", C.ENDS_WITH, "_LOGS")),
        ("file_size > 10MB", Term("File Size", C.GREATER_THAN, "10MB")),
        ("raw_size >= 1024", Term("Raw Size", C.GREATER_THAN_OR_EQUAL_TO, "1024")),
        ("id < -3", Term("Id", C.LESS_THAN, "-3")),
        ("parent_id <= 7", Term("Parent Id", C.LESS_THAN_OR_EQUAL_TO, "7")),
        ("id between 1 and 10", Term("Id", C.BETWEEN, "1,10")),
        ('create_time between "2024-01-01" and now()-1d', Term("Create Time", C.BETWEEN, "2024-01-01,now()-1d")),
        ("effective_time < day() - 7d + 2h", Term("Effective Time", C.LESS_THAN, "day() - 7d + 2h")),
        ("status_time > 1700000000000", Term("Status Time", C.GREATER_THAN, "1700000000000")),
        ("id in ()", Term("Id", C.IN, "")),
        ("status in (locked, Unlocked)", Term("Status", C.IN, "LOCKED,UNLOCKED")),
        ('status = "deleted"', Term("Status", C.EQUALS, "DELETED")),
        ("feed in dictionary Feeds_1", Term("Feed", C.IN_DICTIONARY, "Feeds_1")),
        ('type matches "^Raw\\s+\\w+$"', Term("Type", C.MATCHES_REGEX, "^Raw\\s+\\w+$")),
        ("pipeline is null", Term("Pipeline", C.IS_NULL)),
        ("attr.System-Name is not null", Term("attr.System-Name", C.IS_NOT_NULL)),
        ('`Create Time` > "2024-01-01T00:00:00+02:00"',
         Term("Create Time", C.GREATER_THAN, "2024-01-01T00:00:00+02:00")),
        ('`parent id` = 3', Term("Parent Id", C.EQUALS, "3")),
        ('feed = "say \\"hi\\"\\n\\u00e9"', Term("Feed", C.EQUALS, 'say "hi"\né')),
    ],
)
def test_each_condition(text: str, term: Term) -> None:
    assert parse(text) == term
    assert parse(to_text(term)) == term


def test_all_and_true_are_the_empty_and() -> None:
    assert parse("all") == MATCH_ALL
    assert parse("  TRUE ") == MATCH_ALL
    assert to_text(MATCH_ALL) == "all"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('(feed = "a"', "expression: unbalanced parentheses: '(' is never closed at column 1"),
        ('feed = "a")', "expression: unbalanced parentheses: ')' without '(' at column 11"),
        ('feed = "a" and (type = "b" or (id = 1)',
         "expression: unbalanced parentheses: '(' is never closed at column 16"),
        ('feeed = "a"', "expression: unknown field 'feeed': expected one of"),
        ('feed ~ "a"', "expression: unknown operator '~' at column 6"),
        ('feed like "a"', "expression: unknown operator 'like' at column 6"),
        ('file_size > "abc"',
         "expression: invalid size 'abc' for File Size: expected bytes or a size like 10MB at column 13"),
        ("id = 1.5", "expression: invalid number '1.5' for Id: expected a whole number at column 6"),
        ('create_time > "yesterday"', "expression: invalid date 'yesterday': expected ISO-8601"),
        ("create_time > later()-1d", "expression: invalid date 'later()-1d': unknown function later() (known: now()"),
        ('create_time > "later()-1d"', "expression: invalid date 'later()-1d': unknown function later()"),
        ('feed matches "(a"', "expression: invalid regex '(a': missing ')' at position 1 at column 14"),
        ('feed matches "a(?=b)"', "expression: invalid regex 'a(?=b)': lookahead '(?=' is not supported"),
        ('attr.x > "1"',
         "expression: condition GREATER_THAN is not allowed on attr.x: custom attributes are text at column 8"),
        ('feed between "a" and "b"', "expression: condition BETWEEN is not allowed on Feed"),
        ('feed in dictionary "bad name"', "expression: invalid dictionary name 'bad name'"),
        ("status = open",
         "expression: invalid status 'open' for Status: expected one of UNLOCKED, LOCKED, DELETED at column 10"),
        ("feed = abc", "expression: expected a quoted string for Feed, got 'abc' at column 8"),
        ('feed = "a" and', "expression: expected a condition, got the end of the expression at column 15"),
        ('feed = "a" type = "b"', "expression: expected 'and', 'or' or the end, got 'type' at column 12"),
        ('feed = "abc', "expression: unterminated string at column 8"),
        ('type in ("a,b")', "expression: a value in a list or between cannot contain ',' at column 10"),
        ("id in (1 2)", "expression: expected ',' or ')' in the in list, got '2' at column 10"),
        ('feed = "a" or all', "expression: 'all' can only stand alone as the whole expression at column 15"),
        ("", "expression: empty expression"),
        ('and = "a"', "expression: expected a field, got 'and' at column 1"),
        ('attr.x.y = "a"', "expression: unknown operator '.' at column 7"),
        ('attr.a%b = "a"', "expression: unknown operator '%' at column 7"),
    ],
)
def test_parse_errors_name_the_column(text: str, message: str) -> None:
    with pytest.raises(InvalidInput) as info:
        parse(text)
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


@settings(max_examples=300, deadline=None)
@given(expressions())
def test_to_text_parses_back_to_the_normalized_tree(expr) -> None:
    text = to_text(expr)
    assert parse(text) == normalize(expr)
    assert to_text(parse(text)) == text


@settings(max_examples=300, deadline=None)
@given(expressions())
def test_parsed_trees_are_normalized(expr) -> None:
    parsed = parse(to_text(expr))
    assert normalize(parsed) == parsed


_FRAGMENTS = ['feed', 'type', 'id', 'create_time', 'file_size', 'status', 'attr.k', '`Create Time`', '`x`', '=', '!=',
              '>', '>=', '<', 'and', 'or', 'not', '(', ')', ',', 'in', 'dictionary', 'between', 'contains', 'starts',
              'with', 'ends', 'matches', 'is', 'null', 'all', '"a"', '"', '\\', '"(a"', '10MB', '-1', 'now()', '-1d',
              'locked', '"2024-01-01"', ' ', '*', '.']


@settings(max_examples=1000, deadline=None)
@given(st.one_of(st.text(max_size=40), st.lists(st.sampled_from(_FRAGMENTS), max_size=12).map(" ".join)))
def test_fuzz_parse_raises_only_invalid_input(text: str) -> None:
    try:
        expr = parse(text)
    except InvalidInput as exc:
        assert str(exc).startswith("expression: ")
        return
    validate(expr)
    assert parse(to_text(expr)) == expr


# ---- disabled items, normalization --------------------------------------------------------------


def test_to_text_drops_disabled_items() -> None:
    a = Term("Feed", C.EQUALS, "a")
    off = Term("Feed", C.EQUALS, "b", enabled=False)
    assert to_text(Operator(Op.AND, (a, off))) == 'feed = "a"'
    assert to_text(Operator(Op.OR, (off,))) == "all"
    assert to_text(Operator(Op.NOT, (a, Term("Type", C.EQUALS, "t")))) == 'not (feed = "a" and type = "t")'
    assert normalize(Operator(Op.AND, (a, Operator(Op.OR, ()), Operator(Op.NOT, (off,))))) == a


# ---- Stroom's JSON form -------------------------------------------------------------------------


def test_stroom_json_shapes() -> None:
    stroom = {
        "type": "operator",
        "op": "OR",
        "children": [
            {"type": "term", "field": "Feed", "condition": "EQUALS", "value": "SPECIAL_DATA", "enabled": None},
            {"@type": "term", "field": "create time", "condition": "LESS_THAN", "value": "now()-1y"},
            {"field": "Type", "condition": "EQUALS_CASE_SENSITIVE", "value": "Raw Events", "enabled": False},
            {"children": [], "op": None},
            {"type": "operator", "op": "NOT", "children": [{"field": "Status", "condition": "IN", "value": "locked"}]},
        ],
    }
    expr = from_json(stroom)
    assert expr == Operator(
        Op.OR,
        (
            Term("Feed", C.EQUALS, "SPECIAL_DATA"),
            Term("Create Time", C.LESS_THAN, "now()-1y"),
            Term("Type", C.EQUALS, "Raw Events", enabled=False),
            Operator(Op.AND, ()),
            Operator(Op.NOT, (Term("Status", C.IN, "LOCKED"),)),
        ),
    )
    assert to_json(expr)["children"][2] == {
        "type": "term", "field": "Type", "condition": "EQUALS", "value": "Raw Events", "enabled": False
    }
    assert from_json({}) == MATCH_ALL
    feed_is = {"field": "Feed", "condition": "IS_DOC_REF", "docRef": {"type": "Feed", "uuid": "u-1", "name": "F1"}}
    assert from_json(feed_is) == Term("Feed", C.EQUALS, "F1")
    assert from_json(dict(feed_is, condition="IS_NOT_DOC_REF")) == Term("Feed", C.NOT_EQUALS, "F1")
    assert from_json({"field": "Id", "condition": "EQUALS", "value": 5}) == Term("Id", C.EQUALS, "5")


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"children": [{}, {"field": "Feeed", "condition": "EQUALS", "value": "x"}]},
         "expression.children[1].field: unknown field 'Feeed'"),
        ({"field": "File Size", "condition": "GREATER_THAN", "value": "abc"},
         "expression.value: invalid size 'abc' for File Size"),
        ({"field": "Feed", "condition": "SOUNDS_LIKE", "value": "x"},
         "expression.condition: unknown condition 'SOUNDS_LIKE'"),
        ({"field": "attr.x", "condition": "BETWEEN", "value": "1,2"},
         "expression.condition: condition BETWEEN is not allowed on attr.x: custom attributes are text"),
        ({"op": "XOR", "children": []}, "expression.op: expected AND, OR or NOT, got 'XOR'"),
        ({"children": {"a": 1}}, "expression.children: expected a list, got dict"),
        ({"children": [{"children": [{"field": "Feed", "condition": "MATCHES_REGEX", "value": "a(?<=b)"}]}]},
         "expression.children[0].children[0].value: invalid regex"),
        ({"type": "clause"}, "expression.type: expected 'operator' or 'term', got 'clause'"),
        ({"op": "AND", "field": "Feed"}, "expression: cannot tell an operator from a term"),
        ({"field": "Feed", "condition": "EQUALS"}, "expression.value: EQUALS on Feed needs a value"),
        ({"field": "Feed", "condition": "IS_NULL", "value": "x"}, "expression.value: IS_NULL takes no value"),
        ({"field": "Id", "condition": "BETWEEN", "value": "1"}, "expression.value: BETWEEN on Id needs two values"),
        ({"condition": "EQUALS", "value": "x"}, "expression.field: missing"),
        ({"field": "Feed", "condition": "EQUALS", "value": "x", "enabled": "yes"},
         "expression.enabled: expected true or false"),
        ([1], "expression: expected a JSON object, got list"),
        ({"field": "Feed", "condition": "IS_DOC_REF", "docRef": {"uuid": "u-1"}},
         "expression.docRef: IS_DOC_REF needs a docRef with a name"),
    ],
)
def test_json_errors_name_the_path(obj, message: str) -> None:
    with pytest.raises(InvalidInput) as info:
        from_json(obj)
    assert str(info.value).startswith(message)


@settings(max_examples=300, deadline=None)
@given(expressions())
def test_json_round_trip(expr) -> None:
    assert from_json(to_json(expr)) == expr


# ---- validation and references ------------------------------------------------------------------


def test_validate_names_the_place_and_references() -> None:
    with pytest.raises(InvalidInput, match=r"^expression\.children\[1\]: invalid number 'x' for Id"):
        validate(Operator(Op.AND, (Term("Feed", C.EQUALS, "a"), Term("Id", C.EQUALS, "x"))))
    expr = parse('feed in dictionary d1 or (attr.k = "v" and not type in dictionary d2) or create_time < now()')
    assert referenced_dictionaries(expr) == {"d1", "d2"}
    assert referenced_columns(expr) == {"feed", "attributes", "type", "create_time"}
    disabled = Operator(Op.AND, (Term("Feed", C.IN_DICTIONARY, "d3", enabled=False), Term("Id", C.EQUALS, "1")))
    assert referenced_dictionaries(disabled) == set()
    assert referenced_columns(disabled) == {"id"}
    assert referenced_columns(MATCH_ALL) == set()


@settings(max_examples=200, deadline=None)
@given(terms())
def test_every_generated_term_survives_the_text_form(term: Term) -> None:
    if term.enabled:
        assert parse(to_text(term)) == term


# ---- dates --------------------------------------------------------------------------------------

NOW = ms("2024-03-31T10:20:30.456")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-01-01T00:00:00Z", ms("2024-01-01T00:00:00")),
        ("2024-01-01T02:00:00+02:00", ms("2024-01-01T00:00:00")),
        ("2024-01-01T00:00:00", ms("2024-01-01T00:00:00")),
        ("2024-01-01", ms("2024-01-01T00:00:00")),
        ("2024-01-01T00:00:00.123Z", ms("2024-01-01T00:00:00") + 123),
        ("1700000000000", 1_700_000_000_000),
        ("now()", NOW),
        ("second()", ms("2024-03-31T10:20:30")),
        ("minute()", ms("2024-03-31T10:20:00")),
        ("hour()", ms("2024-03-31T10:00:00")),
        ("day()", ms("2024-03-31T00:00:00")),
        ("week()", ms("2024-03-25T00:00:00")),  # Monday
        ("month()", ms("2024-03-01T00:00:00")),
        ("year()", ms("2024-01-01T00:00:00")),
        ("day()-1M", ms("2024-02-29T00:00:00")),  # the calendar edge: clamps to the last day
        ("now()-1d+2h", NOW - 86_400_000 + 7_200_000),
        ("NOW() - 1w", NOW - 7 * 86_400_000),
        ("day()-1y", ms("2023-03-31T00:00:00")),
        ("now()+30m-15s", NOW + 30 * 60_000 - 15_000),
    ],
)
def test_resolve_date(text: str, expected: int) -> None:
    assert resolve_date(text, NOW) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("yesterday", "invalid date 'yesterday': expected ISO-8601"),
        ("2024-13-01", "invalid date '2024-13-01'"),
        ("99999999999999999", "invalid date '99999999999999999': out of range"),
        ("now()-9000y", "invalid date 'now()-9000y': out of range"),
        ("decade()", "invalid date 'decade()': unknown function decade()"),
        ("now()-1x", "invalid date 'now()-1x': expected ISO-8601"),
    ],
)
def test_bad_dates(text: str, message: str) -> None:
    with pytest.raises(InvalidInput) as info:
        resolve_date(text, NOW)
    assert str(info.value).startswith(message)


_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_DAY = 86_400_000


def _oracle_base(base: str, now: int) -> int:
    """Start of the unit by integer arithmetic (weeks: 1970-01-01 was a Thursday)."""
    if base == "now":
        return now
    if base in ("second", "minute", "hour", "day"):
        size = {"second": 1000, "minute": 60_000, "hour": 3_600_000, "day": _DAY}[base]
        return now - now % size
    days = now // _DAY
    if base == "week":
        return (days - (days + 3) % 7) * _DAY
    date = datetime(1970, 1, 1) + timedelta(days=days)
    first = datetime(date.year, 1 if base == "year" else date.month, 1)
    return (first - datetime(1970, 1, 1)).days * _DAY


def _oracle_add_months(moment_ms: int, months: int) -> int:
    moment = datetime(1970, 1, 1) + timedelta(milliseconds=moment_ms)
    index = moment.year * 12 + moment.month - 1 + months
    year, month = divmod(index, 12)
    day = min(moment.day, calendar.monthrange(year, month + 1)[1])
    shifted = moment.replace(year=year, month=month + 1, day=day)
    return (shifted - datetime(1970, 1, 1)) // timedelta(milliseconds=1)


@settings(max_examples=500, deadline=None)
@given(
    st.integers(0, 4_000_000_000_000),
    st.sampled_from(["now", "second", "minute", "hour", "day", "week", "month", "year"]),
    st.lists(st.tuples(st.sampled_from("+-"), st.integers(0, 500), st.sampled_from("smhdwMy")), max_size=4),
)
def test_relative_dates_match_an_oracle(now: int, base: str, offsets) -> None:
    text = f"{base}()" + "".join(f"{sign}{amount}{unit}" for sign, amount, unit in offsets)
    expected = _oracle_base(base, now)
    for sign, amount, unit in offsets:
        signed = amount if sign == "+" else -amount
        if unit in "My":
            expected = _oracle_add_months(expected, signed * (12 if unit == "y" else 1))
        else:
            expected += signed * _UNIT_MS[unit]
    assert resolve_date(text, now) == expected


@settings(max_examples=300, deadline=None)
@given(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)))
def test_iso_dates_round_trip(moment: datetime) -> None:
    expected = (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)
    assert resolve_date(moment.isoformat(), 0) == expected
    assert resolve_date(moment.isoformat().replace("+00:00", "Z"), 0) == expected


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(max_size=25), st.text(alphabet="now()dayM+-0123456789 yTZ:.", max_size=20)))
def test_fuzz_dates_raise_only_invalid_input(text: str) -> None:
    try:
        value = resolve_date(text, NOW)
    except InvalidInput as exc:
        assert str(exc).startswith("invalid date")
        return
    assert MIN_MS <= value <= MAX_MS


# ---- the regex subset ---------------------------------------------------------------------------


_LINEAR = "it needs a backtracking engine, and regexes run in linear time (RE2 semantics)"


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("a(?=b)", f"lookahead '(?=' is not supported: {_LINEAR} at position 2"),
        ("a(?!b)", f"lookahead '(?!' is not supported: {_LINEAR} at position 2"),
        ("(?<=a)b", f"lookbehind '(?<=' is not supported: {_LINEAR} at position 1"),
        ("(?<!a)b", f"lookbehind '(?<!' is not supported: {_LINEAR} at position 1"),
        ("(?>a+)b", f"atomic group '(?>' is not supported: {_LINEAR} at position 1"),
        ("(a)\\1", f"backreference '\\1' is not supported: {_LINEAR} at position 4"),
        ("(a)(b)\\2", "backreference '\\2' is not supported"),
        ("(?P<n>a)\\k<n>", "named groups are not supported (write '(' or '(?:') at position 1"),
        ("a\\k<n>", "backreference '\\k' is not supported"),
        ("a++", f"possessive quantifier '++' is not supported: {_LINEAR} at position 3"),
        ("a{2,3}+", "possessive quantifier '{2,3}+' is not supported"),
        ("(?<n>a)", "named groups are not supported"),
        ("(?i)a", "inline flags '(?...)' are not supported at position 1"),
        ("(?#c)a", "comments '(?#' are not supported"),
        ("\\bword", "unsupported escape '\\b' at position 1"),
        ("\\p{L}", "unsupported escape '\\p'"),
        ("a*?", "lazy quantifier '*?' is not supported (a greedy one matches the same values) at position 3"),
        ("a**", "a quantifier cannot follow a quantifier (group the first one) at position 3"),
        ("a{3", "bad repetition '{'"),
        ("a{256}", "repetition count above 255"),
        ("a{3,2}", "repetition {n,m} with m < n"),
        ("(a{30}){34}", "nested repetition counts multiply to 1020, above 1000 at position 1"),
        ("x((a{10}|b){10}c){11}", "nested repetition counts multiply to 1100, above 1000 at position 2"),
        ("[[:alpha:]]", "'[' inside a character class must be escaped at position 2"),
        ("[]a]", "empty character class"),
        ("[z-a]", "bad range z-a"),
        ("[a-\\d]", "a range cannot end in a class shorthand"),
        ("[\\D]", "unsupported escape '\\D' in a character class"),
        ("a|", "empty alternative at position 3"),
        ("()", "empty alternative at position 2"),
        ("(a", "missing ')' at position 1"),
        ("a)", "unbalanced ')' at position 2"),
        ("*a", "nothing to repeat at position 1"),
        ("^*", "nothing to repeat at position 2"),
        ("a}", "'}' must be escaped"),
        ("a\\", "trailing backslash at position 2"),
        ("", "empty pattern"),
    ],
)
def test_regex_outside_the_common_subset_is_rejected(pattern: str, message: str) -> None:
    with pytest.raises(InvalidRegex) as info:
        parse_regex(pattern)
    assert message in str(info.value)
    assert str(info.value).startswith("invalid regex")


def test_nested_repetition_up_to_re2s_limit_is_accepted() -> None:
    assert parse_regex("(a{30}){33}").search("a" * 990)
    assert parse_regex("(a{250}|b){4}").search("b" * 4)


@pytest.mark.parametrize("text", ['feed matches "(a)\\1"', 'feed matches "a(?<=b)"', 'type matches "a*+"'])
def test_unlinear_regexes_are_refused_when_parsed(text: str) -> None:
    """Where a rule or hold is read (text, JSON, a tree built in code), a pattern no linear-time
    engine can run is an InvalidRegex (an InvalidInput, exit code 2), before anything is saved."""
    expected = f"^expression: invalid regex .*{re.escape(_LINEAR)} at position [0-9]+ at column 14$"
    with pytest.raises(InvalidRegex, match=expected):
        parse(text)
    term = {"field": "Feed", "condition": "MATCHES_REGEX", "value": "(a)\\1"}
    with pytest.raises(InvalidRegex, match=r"^expression\.children\[0\]\.value: invalid regex '\(a\)\\\\1': backref"):
        from_json({"op": "AND", "children": [term]})
    with pytest.raises(InvalidRegex, match=r"^expression\.children\[0\]: invalid regex"):
        validate(Operator(Op.AND, (Term("Feed", C.MATCHES_REGEX, "a(?=b)"),)))
    assert issubclass(InvalidRegex, InvalidInput) and InvalidRegex.exit_code == 2


def test_regex_translation_pins_the_meaning() -> None:
    regex = parse_regex(r"^a.\d\w\s\D$")
    assert regex.re2 == "^a[^\n][0-9][A-Za-z0-9_][ \t\n\r\f\v][^0-9]\\z"
    assert regex.postgres == "^a[^\n][0-9][A-Za-z0-9_][ \t\n\r\f\v][^0-9]$"
    assert stdlib_pattern(r"^a.\d\w\s\D$") == "^a[^\n][0-9][A-Za-z0-9_][ \t\n\r\f\v][^0-9]\\Z"
    assert not parse_regex("a$").search("xa\n")  # Python's own $ would match here
    assert parse_regex(r"(a|b)+\.[^x-z]").re2 == r"(?:a|b)+\.[^x-z]"


@settings(max_examples=1000, deadline=None)
@given(st.text(alphabet="ab.^$*+?{}[]()|\\-,0123dwsDbpn:=!<é\n", max_size=12))
def test_fuzz_regex_raises_only_invalid_input(pattern: str) -> None:
    try:
        regex = parse_regex(pattern)
    except InvalidInput as exc:
        assert str(exc).startswith("invalid regex")
        return
    re2.compile(regex.re2)  # valid RE2 (parse_regex compiled it too) and valid Python re for the oracle
    re.compile(stdlib_pattern(pattern))
    re.compile(regex.postgres)  # ARE syntax; on the subset Python reads it too
