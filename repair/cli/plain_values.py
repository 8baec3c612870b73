"""The command line's values converted without pydantic when they are plainly valid.

typer 0.2x converts every value that is not a boolean flag through a pydantic ``TypeAdapter``, built
when the value is processed: importing pydantic and building the adapters was about a third of a short
command's start-up (docs/benchmarks.md, "Start-up"). This CLI's values are plain (text, whole numbers
with bounds, one number, a choice among words, lists of text), so :func:`use_plain_values` puts a
converter in front of typer's own on every parameter: a value it recognizes as valid is converted here
to what the adapter returns; anything else (a malformed number, a value out of bounds, an unknown
choice, bytes) goes to typer's adapter, so every message about a bad value stays typer's. Typer releases
without the pydantic layer (click's types) are left as they are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, get_args, get_origin

try:
    from typer._coercion import RuntimeParam, build_runtime_param
    from typer._param_types import coerce_cli_choice
    from typer._typing import is_literal_type, literal_values
    from typer.core import _TyperParameter
except ImportError:  # pragma: no cover - typer before 0.2x: click's own types, no pydantic
    RuntimeParam = None

#: Digits only: what int() and pydantic read alike (signs, spaces, underscores go to pydantic).
_WHOLE_NUMBER = re.compile(r"[0-9]+\Z")
#: Digits with an optional fraction: what float() and pydantic read alike.
_DECIMAL_NUMBER = re.compile(r"[0-9]+(\.[0-9]+)?\Z")
#: Returned by :func:`_plain` for a value it leaves to typer.
_NOT_PLAIN = object()


def use_plain_values() -> None:
    """Put the plain converter in front of typer's on every parameter typer builds (idempotent)."""
    if RuntimeParam is None or getattr(_TyperParameter, "_plain_values", False):
        return
    _TyperParameter._plain_values = True

    def get_runtime_param(self):
        if self._runtime_param is None:
            descriptor = self.type_descriptor
            self._runtime_param = _PlainFirst(annotation=descriptor.annotation, parameter_info=descriptor.parameter_info,
                                              descriptor=descriptor)
        return self._runtime_param

    _TyperParameter.get_runtime_param = get_runtime_param


def _plain(annotation: Any, info: Any, value: Any) -> Any:
    """``value`` converted as typer's pydantic adapter for ``annotation`` would, or ``_NOT_PLAIN``."""
    if info.parser is not None or getattr(info, "clamp", False):
        return _NOT_PLAIN
    if annotation is str:
        return value if isinstance(value, str) else _NOT_PLAIN
    if annotation is int or annotation is float:
        pattern = _WHOLE_NUMBER if annotation is int else _DECIMAL_NUMBER
        if isinstance(value, str) and pattern.match(value):
            number = annotation(value)
        elif type(value) is annotation:  # a default given as a number
            number = value
        else:
            return _NOT_PLAIN
        in_bounds = (info.min is None or number >= info.min) and (info.max is None or number <= info.max)
        return number if in_bounds else _NOT_PLAIN
    if is_literal_type(annotation):
        try:
            return coerce_cli_choice(value, choices=literal_values(annotation), case_sensitive=info.case_sensitive)
        except ValueError:
            return _NOT_PLAIN
    if get_origin(annotation) is list and get_args(annotation) == (str,) and isinstance(value, (list, tuple)):
        return list(value) if all(isinstance(item, str) for item in value) else _NOT_PLAIN
    return _NOT_PLAIN


if RuntimeParam is not None:

    @dataclass(frozen=True)
    class _PlainFirst(RuntimeParam):
        """Converts a plainly valid value itself; hands anything else to typer's converter (pydantic)."""

        descriptor: Any

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            plain = _plain(self.annotation, self.parameter_info, value)
            if plain is not _NOT_PLAIN:
                return plain
            return build_runtime_param(self.descriptor)._coerce_value(value, param=param, ctx=ctx)
