"""Reading a stored value as the type its column promises, or saying which row is damaged.

SQLite lets any column of a non-STRICT table hold any type, and a store invites ad-hoc SQL: a row
edited by hand, by another program or by a hostile file can hold text where bytes belong, an
integer where a date does, a JSON list where an object does. Every read of a tokenizer's row goes
through these functions, so that such a row is a :class:`~bpestore.errors.DamagedStoreError` that
names the store, the tokenizer, the table, the column and the row, never a ``TypeError`` deep in
the loader or the engine.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ..errors import DamagedStoreError
from .sqlite_uri import NotUtf8Text

_SQL_TYPES = {str: "text", int: "an integer", float: "a real number", bytes: "a blob", bytearray: "a blob", memoryview: "a blob"}


def described(value: object) -> str:
    """A stored value's type in SQL's words, and the value, shortened: ``text ('abc')``."""
    if value is None:
        return "NULL"
    if isinstance(value, NotUtf8Text):
        return f"text that is not UTF-8 ({bytes(value)[:20]!r})"
    shown = repr(value)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return f"{_SQL_TYPES.get(type(value), type(value).__name__)} ({shown})"


@dataclass(frozen=True)
class Row:
    """Where a stored value was read: the store, the tokenizer (``NAME@V``, or ``""``), the table
    and the row (how it is found, e.g. ``"token_id 5"``)."""

    location: str
    ref: str
    table: str
    key: str

    def damaged(self, column: str, problem: str) -> DamagedStoreError:
        owner = f"{self.ref} is damaged: " if self.ref else "damaged row: "
        return DamagedStoreError(f"{self.location}: {owner}{self.table}.{column} ({self.key}) {problem}")

    def text(self, column: str, value: object, *, nullable: bool = False) -> Any:
        if isinstance(value, str) or (value is None and nullable):
            return value
        raise self.damaged(column, f"holds {described(value)}, not text")

    def integer(self, column: str, value: object, *, nullable: bool = False) -> Any:
        if (isinstance(value, int) and not isinstance(value, bool)) or (value is None and nullable):
            return value
        raise self.damaged(column, f"holds {described(value)}, not an integer")

    def number(self, column: str, value: object, *, nullable: bool = False) -> Any:
        if (isinstance(value, (int, float)) and not isinstance(value, bool)) or (value is None and nullable):
            return value
        raise self.damaged(column, f"holds {described(value)}, not a number")

    def moment(self, column: str, value: object) -> datetime:
        """A date and time, stored as ISO text (SQLite) or as a timestamp (PostgreSQL); in UTC."""
        if isinstance(value, datetime):
            return value.replace(tzinfo=timezone.utc)
        if isinstance(value, str):
            try:
                return datetime.fromisoformat(value).replace(tzinfo=timezone.utc)
            except ValueError:
                pass
        raise self.damaged(column, f"holds {described(value)}, not a date and time")

    def json_list_of_text(self, column: str, value: object, *, nullable: bool = False) -> Any:
        """A JSON list of strings (``special_tokens``, ``added_tokens``, ``source_paths``)."""
        if value is None and nullable:
            return None
        parsed = self._json(column, value)
        if not isinstance(parsed, list) or not all(isinstance(item, str) for item in parsed):
            raise self.damaged(column, f"holds {_shape(parsed)}, not a JSON list of strings")
        return parsed

    def json_object(self, column: str, value: object, *, nullable: bool = False) -> Any:
        """A JSON object (``training_params``)."""
        if value is None and nullable:
            return None
        parsed = self._json(column, value)
        if not isinstance(parsed, dict):
            raise self.damaged(column, f"holds {_shape(parsed)}, not a JSON object")
        return parsed

    def _json(self, column: str, value: object) -> Any:
        if not isinstance(value, str):
            raise self.damaged(column, f"holds {described(value)}, not JSON text")
        try:
            return json.loads(value)
        except (ValueError, RecursionError) as error:
            raise self.damaged(column, f"is not valid JSON ({str(error)[:80]})") from None


def _shape(parsed: object) -> str:
    shown = json.dumps(parsed)
    return f"JSON {shown if len(shown) <= 40 else shown[:37] + '...'}"


def checked_vocab_rows(
    rows: Sequence[tuple[Any, Any]], location: str, ref: str, tokenizer_id: object = None, vocab_size: object = None
) -> Sequence[tuple[int, bytes]]:
    """``vocab`` rows ``(token_id, token)``, each an integer and a blob, else DamagedStoreError;
    given the tokenizer's ``vocab_size`` (its ``tokenizers`` row's), as many rows as it says: a
    row whose ``tokenizer_id`` was changed by hand is missing from them, and the model made from
    the rest would fail far from here (a byte-level vocab lacking a byte)."""
    if all(type(token_id) is int and type(token) is bytes for token_id, token in rows):
        if type(vocab_size) is int and len(rows) != vocab_size:
            raise DamagedStoreError(
                f"{location}: {ref} is damaged: vocab holds {len(rows)} rows with vocab.tokenizer_id {tokenizer_id!r}, "
                f"its row's tokenizers.vocab_size says {vocab_size}"
            )
        return rows
    for token_id, token in rows:
        row = Row(location, ref, "vocab", f"token_id {token_id!r}")
        row.integer("token_id", token_id)
        if type(token) is not bytes:
            raise row.damaged("token", f"holds {described(token)}, not a blob")
    return checked_vocab_rows([(int(i), bytes(t)) for i, t in rows], location, ref, tokenizer_id, vocab_size)


def checked_merge_rows(rows: Iterable[tuple[Any, Any]], location: str, ref: str) -> list[tuple[bytes, bytes]]:
    """``merges`` rows ``(left, right)`` in rank order, each a pair of blobs, else DamagedStoreError."""
    listed = list(rows)
    if all(type(left) is bytes and type(right) is bytes for left, right in listed):
        return listed
    for rank, (left, right) in enumerate(listed):
        row = Row(location, ref, "merges", f"the merge at position {rank} in rank order")
        for column, value in (("left", left), ("right", right)):
            if type(value) is not bytes:
                raise row.damaged(column, f"holds {described(value)}, not a blob")
    return listed
