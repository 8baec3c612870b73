"""``repair.formats.records.record``: the methods it shares answer as those ``dataclass`` compiles per class.

Each case defines the same class twice, with ``dataclass`` and with ``record``, and compares what their
instances answer (repr, equality, hash, what the class body defines itself)."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, dataclass, field, fields

import pytest

from repair.formats.records import record


def _pair(decorator_options: dict, body):
    """The class ``body(decorator)`` built with ``dataclass`` and with ``record``."""
    return body(lambda cls: dataclass(**decorator_options)(cls)), body(lambda cls: record(**decorator_options)(cls))


def _point(decorate):
    @decorate
    class Point:
        x: int
        y: list = field(default_factory=list)
        note: str = field(default="", repr=False, compare=False)
        weight: float = field(default=0.0, hash=False)

    return Point


@pytest.mark.parametrize("options", [{}, {"frozen": True}, {"frozen": True, "slots": True}, {"kw_only": True}])
def test_repr_equality_and_hash_as_dataclass(options):
    for cls in _pair(options, _point):
        a = cls(x=1, y=(1, 2), note="a", weight=0.5)
        same = cls(x=1, y=(1, 2), note="other note", weight=0.5)
        other = cls(x=1, y=(1, 2), note="a", weight=0.25)
        assert repr(a) == "_point.<locals>.Point(x=1, y=(1, 2), weight=0.5)"  # the qualified name, as dataclass
        assert a == same and not a != same
        assert a != other
        assert (a == (1, (1, 2), 0.5)) is False  # another class: NotImplemented, then identity
        assert a.__eq__(object()) is NotImplemented
        if options.get("frozen"):
            assert hash(a) == hash(same) == hash(other)  # weight has hash=False, note compare=False
            with pytest.raises(FrozenInstanceError):
                a.x = 2
        else:
            with pytest.raises(TypeError, match="unhashable"):
                hash(a)
        assert [f.name for f in fields(cls)] == ["x", "y", "note", "weight"]


def test_a_subclass_instance_is_not_equal_to_its_base_instance():
    for base in _pair({}, _point):
        sub = record(type("Sub", (base,), {"__annotations__": {}}))
        assert sub(1) != base(1) and base(1) != sub(1)
        assert repr(sub(1)) == "Sub(x=1, y=[], weight=0.0)"


def test_methods_of_the_class_body_are_kept():
    def with_own_methods(decorate):
        @decorate
        class Named:
            name: str

            def __repr__(self) -> str:
                return f"<{self.name}>"

            def __eq__(self, other) -> bool:
                return isinstance(other, Named) and other.name.lower() == self.name.lower()

            def __hash__(self) -> int:
                return hash(self.name.lower())

        return Named

    for cls in _pair({}, with_own_methods):
        assert repr(cls("A")) == "<A>"
        assert cls("A") == cls("a")
        assert hash(cls("A")) == hash(cls("a"))


def test_an_eq_of_the_class_body_without_hash_as_dataclass():
    def eq_only(decorate):
        @decorate
        class Key:
            value: int

            def __eq__(self, other) -> bool:
                return isinstance(other, Key) and other.value % 10 == self.value % 10

        return Key

    dataclass_key, record_key = _pair({"frozen": True}, eq_only)
    for cls in (dataclass_key, record_key):
        assert cls(3) == cls(13)
    # Frozen: the fields' hash is added (the body's __eq__ alone left __hash__ None); else unhashable.
    assert hash(dataclass_key(3)) == hash(record_key(3)) == hash((3,))
    for cls in _pair({}, eq_only):
        with pytest.raises(TypeError, match="unhashable"):
            hash(cls(3))


def test_a_recursive_reference_is_shown_as_dots():
    for cls in _pair({}, _point):
        a = cls(1)
        a.y.append(a)
        assert repr(a) == "_point.<locals>.Point(x=1, y=[...], weight=0.0)"


def test_fields_with_one_or_no_compared_field():
    def one(decorate):
        @decorate
        class One:
            value: float
            ignored: int = field(default=0, compare=False)

        return One

    def none(decorate):
        @decorate
        class Nothing:
            ignored: int = field(default=0, compare=False)

        return Nothing

    nan = float("nan")
    for cls in _pair({"frozen": True}, one):
        assert cls(nan) == cls(nan)  # the same NaN object: equal inside a tuple, as dataclass compares
        assert cls(1.0, 1) == cls(1.0, 2) and hash(cls(1.0, 1)) == hash(cls(1.0, 2))
        assert cls(1.0) != cls(2.0)
    for cls in _pair({"frozen": True}, none):
        assert cls(1) == cls(2) and hash(cls(1)) == hash(cls(2))
