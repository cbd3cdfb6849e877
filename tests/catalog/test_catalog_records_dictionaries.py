"""Dictionaries (named word lists for IN_DICTIONARY) on SQLite and PostgreSQL."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st

import tidekeep as tk
from tidekeep.catalog.dictionaries import clean_words, referenced_dictionaries
from tidekeep.errors import InvalidInput, NotFound
from tidekeep.store.schema_catalog import catalog_dictionaries, catalog_rules


def save_rules_document(client: tk.Client, document: object) -> None:
    """The saved rule set as the rules part stores it: row "default", a JSON list of rules."""
    with client.workspace.db.write() as conn:
        conn.execute(sa.delete(catalog_rules))
        conn.execute(sa.insert(catalog_rules).values(name="default", version="00000000-0000-0000-0000-000000000001",
                                                     document=json.dumps(document), updated_ms=0, updated_by="test"))


def stored(client: tk.Client) -> list[tuple]:
    with client.workspace.db.read() as conn:
        return [tuple(r) for r in conn.execute(sa.select(catalog_dictionaries).order_by(catalog_dictionaries.c.name))]


def test_set_get_all_replace_delete(client: tk.Client) -> None:
    assert client.catalog.dictionaries() == {}
    client.catalog.set_dictionary("feeds", ["  A ", "", "B", "A", "\tC\n"])
    client.catalog.set_dictionary("empty", ["  ", ""])
    assert client.catalog.dictionary("feeds") == ["A", "B", "C"]
    assert client.catalog.dictionaries() == {"empty": [], "feeds": ["A", "B", "C"]}
    client.catalog.set_dictionary("feeds", ["Z"])
    assert client.catalog.dictionary("feeds") == ["Z"]
    client.catalog.delete_dictionary("feeds")
    assert client.catalog.dictionaries() == {"empty": []}
    with pytest.raises(NotFound, match="dictionary 'feeds' does not exist"):
        client.catalog.dictionary("feeds")
    with pytest.raises(NotFound, match="dictionary 'feeds' does not exist"):
        client.catalog.delete_dictionary("feeds")


def test_bad_names_and_words_change_nothing(client: tk.Client) -> None:
    client.catalog.set_dictionary("keep", ["x"])
    before = stored(client)
    with pytest.raises(InvalidInput, match="invalid dictionary name 'a b': contains ' '"):
        client.catalog.set_dictionary("a b", ["x"])
    with pytest.raises(InvalidInput, match="invalid dictionary name '': is empty"):
        client.catalog.set_dictionary("", ["x"])
    with pytest.raises(InvalidInput, match="dictionary word 2 is not a string"):
        client.catalog.set_dictionary("keep", ["y", 3])
    with pytest.raises(InvalidInput, match="must be a list of strings, got str"):
        client.catalog.set_dictionary("keep", "y")
    assert stored(client) == before


def stroom_rule(number: int, expression: dict) -> dict:
    return {"ruleNumber": number, "name": f"r{number}", "enabled": True, "expression": expression,
            "age": 1, "timeUnit": "DAYS", "forever": False}


def test_delete_refused_while_saved_rules_use_it(client: tk.Client) -> None:
    client.catalog.set_dictionary("used", ["INTERNAL_LOGS"])
    client.catalog.set_dictionary("docref", ["x"])
    client.catalog.set_dictionary("free", ["y"])
    nested = {"type": "operator", "op": "AND", "children": [
        {"type": "operator", "op": "NOT", "enabled": False, "children": [
            {"type": "term", "field": "Feed", "condition": "IN_DICTIONARY", "value": "used"}]}]}
    by_ref = {"type": "operator", "op": "OR", "children": [
        {"type": "term", "field": "Type", "condition": "IN_DICTIONARY",
         "docRef": {"type": "Dictionary", "uuid": "u-1", "name": "docref"}}]}
    save_rules_document(client, [stroom_rule(1, nested), stroom_rule(2, by_ref)])
    before = stored(client)
    for name in ("used", "docref"):
        with pytest.raises(InvalidInput, match=f"dictionary '{name}' is used by the saved retention rules"):
            client.catalog.delete_dictionary(name)
    assert stored(client) == before
    client.catalog.delete_dictionary("free")
    save_rules_document(client, [stroom_rule(1, {"type": "operator", "op": "AND", "children": []})])
    client.catalog.delete_dictionary("used")
    assert list(client.catalog.dictionaries()) == ["docref"]


def test_referenced_dictionaries_text_form() -> None:
    assert referenced_dictionaries([{"expression": 'feed in dictionary "big_feeds" and type = "Raw"'}]) == {"big_feeds"}
    assert referenced_dictionaries([{"expression": {"condition": "EQUALS", "value": "used"}}]) == set()


@given(st.lists(st.text(max_size=6), max_size=12))
def test_clean_words_oracle(words: list[str]) -> None:
    expected: list[str] = []
    for word in words:
        if word.strip() and word.strip() not in expected:
            expected.append(word.strip())
    assert clean_words(words) == expected


def test_delete_refused_for_rules_saved_by_the_rules_store(client: tk.Client, tmp_path) -> None:
    """The guard reads what RulesStore really saves (the Stroom JSON document), from either syntax."""
    client.catalog.set_dictionary("big_feeds", ["INTERNAL_LOGS"])
    client.catalog.set_dictionary("types", ["Events"])
    client.catalog.set_dictionary("unused", ["x"])
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "rules:\n"
        "  - number: 1\n    name: Big feeds\n    expression: feed in dictionary big_feeds\n    age: 1 year\n"
        "  - number: 2\n    name: Types\n    age: 1 month\n    expression:\n      op: AND\n      children:\n"
        "        - {field: Type, condition: IN_DICTIONARY, value: types}\n")
    client.catalog.set_rules(rules)
    for name in ("big_feeds", "types"):
        with pytest.raises(InvalidInput, match=f"dictionary '{name}' is used by the saved retention rules"):
            client.catalog.delete_dictionary(name)
    client.catalog.delete_dictionary("unused")
    assert sorted(client.catalog.dictionaries()) == ["big_feeds", "types"]
