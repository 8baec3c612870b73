"""Operator state rows of an export's Parquet parts compared with the source's, and a changed state's
elements: a list's values, a broadcast state's entries (decoded values encoded where the raw bytes are
null or stale)."""

from __future__ import annotations

import json

from repair.errors import FormatError, RepairError
from repair.formats.flink.arrow import json_text
from repair.formats.flink.row_codecs import kryo_like, same_value
from repair.formats.flink.value_encoders import EncodeError, encoder_for
from repair.formats.flink.values import decoder_for
from repair.ops.write_savepoint.rows import JSON_TEXT


def with_encoded_value(row: dict, serializer, where: str) -> dict:
    """``row`` with ``value_raw`` encoded from ``value`` where the raw bytes are null or hold another value
    (a list element changed in the Parquet; serializers :mod:`repair.formats.flink.value_encoders` writes).
    A value exported as JSON text whose text was edited is written by the Kryo encoder in the classes of
    the bytes it replaces; other JSON text is not read back, so an edit of it is refused, not lost."""
    text = row.get(JSON_TEXT + "value")
    if text is not None:
        return _with_json_text(row, serializer, text, where)
    encode = encoder_for(serializer)
    if row.get("value") is None or encode is None:
        return row
    raw = row["value_raw"]
    if raw is not None:
        try:
            if same_value(decoder_for(serializer).decode_all(raw, 0, "value"), row["value"]):
                return row
        except RepairError:
            pass
    try:
        return {**row, "value_raw": encode(row["value"])}
    except EncodeError as error:
        raise FormatError("value", 0, "a value the state's serializer writes", repr(row["value"]), detail=str(error)).in_source(where) from None


def _with_json_text(row: dict, serializer, text: str, where: str) -> dict:
    raw = row["value_raw"]
    if raw is not None:
        try:
            if json_text(decoder_for(serializer).decode_all(raw, 0, "value")) == text:
                return row
        except RepairError:
            pass
    encode = kryo_like(serializer)
    if encode is None:
        raise FormatError("value", 0, "the JSON text export wrote for value_raw (JSON columns are not read back: change "
                          "value_raw itself, or remove the row)", text[:200]).in_source(where)
    try:
        value = json.loads(text)
    except ValueError as error:
        raise FormatError("value", 0, "JSON text", text[:80], detail=str(error)).in_source(where) from None
    try:
        return {**row, "value_raw": encode(value, raw, row)}
    except EncodeError as error:
        raise FormatError("value", 0, "a value the state's Kryo serializer writes", text[:200], detail=str(error)).in_source(where) from None


def list_elements(rows: list[tuple[tuple, str]]) -> list[bytes]:
    """A list state's elements from its rows (``(list_index, user_key_raw, value_raw)`` and where),
    in index order; indexes must be distinct and the raw bytes there."""
    seen: dict[int, str] = {}
    for (index, _, value), where in rows:
        if index < 0 or not value:
            raise FormatError("value_raw" if index >= 0 else "list_index", 0, "an element's index and raw bytes", "null").in_source(where)
        if index in seen:
            raise FormatError("list_index", 0, "one element per index of a list", f"index {index} again (first at {seen[index]})").in_source(where)
        seen[index] = where
    return [value for (_, _, value), _ in sorted(rows)]


def operator_row(row: dict) -> tuple:
    """What an operator state row is compared by: its index and raw bytes."""
    return row["list_index"] if row["list_index"] is not None else -1, row["user_key_raw"] or b"", row["value_raw"] or b""


def broadcast_entries(rows: list[tuple[tuple, str]]) -> list[bytes]:
    """A broadcast state's entries (key bytes then value bytes) from its rows (``(list_index,
    user_key_raw, value_raw)`` and where), in key order; keys must be distinct and the raw bytes there."""
    seen: dict[bytes, str] = {}
    for (_, key, value), where in rows:
        if not key or not value:
            raise FormatError("user_key_raw" if not key else "value_raw", 0, "a broadcast entry's raw key and value", "null").in_source(where)
        if key in seen:
            raise FormatError("user_key_raw", 0, "one entry per key of a broadcast state", f"a duplicate of {seen[key]}").in_source(where)
        seen[key] = where
    return [key + value for (_, key, value), _ in sorted(rows)]
