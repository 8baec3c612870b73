"""``record``: a dataclass whose ``__repr__``, ``__eq__`` and ``__hash__`` are shared functions, not code
compiled for each class.

``dataclasses.dataclass`` writes the source of each generated method and compiles it when the class is
created (``exec``): about 0.1-0.15 ms per method, 0.4-0.5 ms per class, and a short command creates some 80
dataclasses before it reads a byte (0.04 CPU s of ``repair verify``'s start-up:
docs/benchmarks/verify.md, "Start-up classes"). ``record`` lets ``dataclass`` generate only ``__init__``
(and a frozen class's ``__setattr__`` and ``__delattr__``) and gives the class ``__repr__``, ``__eq__`` and,
where ``dataclass`` would, ``__hash__`` built from the class's fields without compiling anything. They
answer as ``dataclass``'s do:

* ``__repr__``: ``Name(field=value, ...)`` over the fields with ``repr=True``, ``...`` for a recursive
  reference to the instance being shown;
* ``__eq__``: the tuples of the fields with ``compare=True`` compared when both are of the very same
  class, else ``NotImplemented``;
* ``__hash__``: a frozen class hashes the tuple of its fields with ``hash=True`` (or ``compare=True`` when
  ``hash`` is not given); a class that is not frozen is unhashable (``__hash__ = None``);
* a method the class body defines itself is kept, as ``dataclass`` keeps it.

``order``, ``unsafe_hash`` and ``eq=False`` are not offered: use ``dataclass`` where a class needs them.
"""

from __future__ import annotations

import dataclasses
import reprlib
from operator import attrgetter
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # type checkers read ``record`` as they read ``dataclass`` (PEP 681)
    from typing_extensions import dataclass_transform
else:  # the marker informs type checkers only: nothing to do at run time

    def dataclass_transform(**_options):
        return lambda decorator: decorator


@dataclass_transform()
def record(cls=None, /, *, frozen: bool = False, **options):
    """``@record`` or ``@record(frozen=True, slots=True, kw_only=True, ...)``: ``dataclass`` with the
    ``__repr__``, ``__eq__`` and ``__hash__`` described in the module's documentation."""

    def wrap(target):
        own = target.__dict__
        has_repr, has_eq = "__repr__" in own, "__eq__" in own
        explicit_hash = own.get("__hash__", dataclasses.MISSING)
        has_hash = not (explicit_hash is dataclasses.MISSING or (explicit_hash is None and has_eq))
        made = dataclasses.dataclass(target, frozen=frozen, repr=False, eq=False, **options)
        fields = dataclasses.fields(made)
        if not has_repr:
            made.__repr__ = _repr_function([f.name for f in fields if f.repr])
            made.__repr__.__qualname__ = f"{made.__qualname__}.__repr__"
        if not has_eq:
            made.__eq__ = _eq_function(_values([f.name for f in fields if f.compare]))
            made.__eq__.__qualname__ = f"{made.__qualname__}.__eq__"
        if not has_hash:
            if frozen:
                values = _values([f.name for f in fields if (f.compare if f.hash is None else f.hash)])
                made.__hash__ = lambda self: hash(values(self))
            else:
                made.__hash__ = None
        return made

    return wrap if cls is None else wrap(cls)


def _values(names: list[str]):
    """``self -> tuple`` of the attributes ``names`` (a tuple also for one name, or none)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        (name,) = names
        return lambda self: (getattr(self, name),)
    return lambda self: ()


def _repr_function(names: list[str]):
    @reprlib.recursive_repr()
    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{self.__class__.__qualname__}({shown})"

    return __repr__


def _eq_function(values):
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented

    return __eq__
