"""Old keyword names of the library's functions, still accepted with a :class:`DeprecationWarning`.

Every command names its input ``path``, its output ``out`` and its operator selectors ``operators``
(docs/library.md). Callers written against the earlier names (``root=``, ``checkpoint=``,
``export_dir=``, ``db_dir=``, ``to=``, ``uids=``) keep working: :func:`renamed` maps them to the new name
and warns once per call site, as Python's warnings filter does.
"""

from __future__ import annotations

import functools
import warnings
from typing import Callable, TypeVar

F = TypeVar("F", bound=Callable)


def renamed(**old_to_new: str) -> Callable[[F], F]:
    """Accept each keyword ``old`` as ``old_to_new[old]``, warning that it is deprecated."""

    def wrap(function: F) -> F:
        @functools.wraps(function)
        def call(*args, **kwargs):
            for old, new in old_to_new.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(f"{function.__name__}() got {old}= and {new}=; {old} is the old name of {new}")
                    warnings.warn(f"{function.__name__}({old}=...) is deprecated: use {new}=...", DeprecationWarning, stacklevel=2)
                    kwargs[new] = kwargs.pop(old)
            return function(*args, **kwargs)

        return call  # type: ignore[return-value]

    return wrap
