"""The runbooks, shipped with the package: one Markdown page per incident class (see README.md here).

``repair runbook NAME`` prints one; :func:`names`, :func:`title` and :func:`text` read them through
``importlib.resources``, so they work from an installed wheel as from the repository.
"""

from __future__ import annotations

from importlib import resources

from repair.errors import UsageError


def names() -> list[str]:
    """Every runbook's name (its file name without ``.md``), the index ``README`` first."""
    found = sorted(entry.name[:-3] for entry in resources.files(__name__).iterdir() if entry.name.endswith(".md"))
    return sorted(found, key=lambda name: name != "README")


def title(name: str) -> str:
    """A runbook's one-line description: its first line, the Markdown heading without ``#``."""
    first = text(name).split("\n", 1)[0]
    return first.lstrip("#").strip()


def text(name: str) -> str:
    """The Markdown of runbook ``name`` (``manifest-missing``, or its path as diagnose and doctor print it)."""
    wanted = name.rsplit("/", 1)[-1].removesuffix(".md")
    if wanted not in names():
        raise UsageError(f"no runbook {name!r}; the runbooks are: {', '.join(names())}")
    return resources.files(__name__).joinpath(f"{wanted}.md").read_text(encoding="utf-8")
