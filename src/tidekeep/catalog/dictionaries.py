"""Dictionaries: named word lists that IN_DICTIONARY terms test against.

A dictionary's name follows the workspace name rule ([A-Za-z0-9_-]{1,255}). Its words are trimmed,
empty ones dropped and repeats removed (first occurrence kept); they are stored as a JSON list. A
dictionary that the saved rule set (catalog_rules row "default") names in an IN_DICTIONARY term
cannot be deleted: the rules would stop meaning what they say. A dictionary that a hold on records
names can be neither changed nor deleted while the hold exists: new words would change which records
the hold protects, so an edit could release held records without removing the hold (docs/holds.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..errors import HoldActive, InvalidInput, InvalidName, NotFound
from ..names import check_name
from ..store.schema_catalog import catalog_dictionaries, catalog_rules, catalog_trackers

if TYPE_CHECKING:
    from ..store.house import Workspace

RULE_SET_NAME = "default"
IN_DICTIONARY = "IN_DICTIONARY"


def check_dictionary_name(name: object) -> str:
    try:
        return check_name(name, "dictionary name")
    except InvalidName as exc:
        raise InvalidInput(str(exc)) from None


def clean_words(words: Iterable[Any]) -> list[str]:
    """Trimmed, non-empty, each once, in first-seen order."""
    if isinstance(words, (str, bytes)) or not isinstance(words, Iterable):
        raise InvalidInput(f"dictionary words must be a list of strings, got {type(words).__name__}")
    out: dict[str, None] = {}
    for i, word in enumerate(words, start=1):
        if not isinstance(word, str):
            raise InvalidInput(f"dictionary word {i} is not a string: {word!r}")
        word = word.strip()
        if word:
            out.setdefault(word, None)
    return list(out)


def _dictionary_names_in_text(text: str) -> set[str]:
    # a rule whose expression is kept in the text syntax: `field in dictionary NAME` or `in_dictionary("NAME")`
    pattern = re.compile(r"\bin[\s_]+dictionary\s*\(?\s*[\"']?([A-Za-z0-9_-]{1,255})", re.IGNORECASE)
    return set(pattern.findall(text))


def referenced_dictionaries(document: Any) -> set[str]:
    """Every dictionary name an IN_DICTIONARY term names anywhere in a rule document (a walk over
    the JSON, so it finds terms however deeply nested, in rules enabled or not)."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            condition = node.get("condition")
            if isinstance(condition, str) and condition.upper() == IN_DICTIONARY:
                value = node.get("value")
                if isinstance(value, str) and value.strip():
                    found.add(value.strip())
                doc_ref = node.get("docRef")
                if isinstance(doc_ref, dict) and isinstance(doc_ref.get("name"), str):
                    found.add(doc_ref["name"].strip())
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)
        elif isinstance(node, str):
            found.update(_dictionary_names_in_text(node))

    walk(document)
    return found


class DictionaryStore:
    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.db = workspace.db

    def set(self, name: str, words: Sequence[str]) -> list[str]:
        """Create or replace a dictionary; returns the words as stored."""
        name = check_dictionary_name(name)
        cleaned = clean_words(words)
        values = {"words": json.dumps(cleaned, ensure_ascii=False), "updated_ms": self.workspace.clock.now_ms()}
        with self.db.write() as conn:
            stored = conn.execute(sa.select(catalog_dictionaries.c.words)
                                  .where(catalog_dictionaries.c.name == name)).scalar_one_or_none()
            if stored is not None and json.loads(stored) != cleaned:
                _refuse_if_a_hold_uses(conn, name, "changed")
            updated = conn.execute(sa.update(catalog_dictionaries).where(catalog_dictionaries.c.name == name)
                                   .values(**values)).rowcount
            if not updated:
                conn.execute(sa.insert(catalog_dictionaries).values(name=name, **values))
            document = conn.execute(sa.select(catalog_rules.c.document)
                                    .where(catalog_rules.c.name == RULE_SET_NAME)).scalar_one_or_none()
            if updated and document is not None and name in referenced_dictionaries(json.loads(document)):
                # new words change what the saved rules match, as an edit of the rules would: the
                # trackers' processed spans no longer mean "done", so the next run is a full one
                conn.execute(sa.delete(catalog_trackers))
        return cleaned

    def get(self, name: str) -> list[str]:
        name = check_dictionary_name(name)
        with self.db.read() as conn:
            words = conn.execute(sa.select(catalog_dictionaries.c.words)
                                 .where(catalog_dictionaries.c.name == name)).scalar_one_or_none()
        if words is None:
            raise NotFound(f"dictionary {name!r} does not exist")
        return list(json.loads(words))

    def all(self) -> dict[str, list[str]]:
        """Every dictionary, by name (sorted)."""
        with self.db.read() as conn:
            rows = conn.execute(sa.select(catalog_dictionaries).order_by(catalog_dictionaries.c.name))
            return {r.name: list(json.loads(r.words)) for r in rows}

    def delete(self, name: str) -> None:
        """Delete a dictionary; refused (InvalidInput) while the saved rule set uses it."""
        name = check_dictionary_name(name)
        with self.db.write() as conn:
            exists = conn.execute(sa.select(catalog_dictionaries.c.name)
                                  .where(catalog_dictionaries.c.name == name)).scalar_one_or_none()
            if exists is None:
                raise NotFound(f"dictionary {name!r} does not exist")
            _refuse_if_a_hold_uses(conn, name, "deleted")
            document = conn.execute(sa.select(catalog_rules.c.document)
                                    .where(catalog_rules.c.name == RULE_SET_NAME)).scalar_one_or_none()
            if document is not None and name in referenced_dictionaries(json.loads(document)):
                raise InvalidInput(f"dictionary {name!r} is used by the saved retention rules; "
                                   "remove it from the rules first")
            conn.execute(sa.delete(catalog_dictionaries).where(catalog_dictionaries.c.name == name))


def _refuse_if_a_hold_uses(conn: Any, name: str, action: str) -> None:
    from .expressions import referenced_dictionaries as named_in
    from .holds import record_holds

    for hold, expression in record_holds(conn):  # oldest first
        if name in named_in(expression):
            raise HoldActive(f"dictionary {name!r} is named by legal hold {hold.id} ({hold.reason}) on records; it "
                             f"cannot be {action} until the hold is removed", hold.id, hold.reason)


__all__ = ["DictionaryStore", "check_dictionary_name", "clean_words", "referenced_dictionaries"]
