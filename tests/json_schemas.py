"""The JSON Schemas of docs/schema/ (the ``--json`` contract), loaded once, with the validation the
tests share: every command's document, and the error document of a run that failed."""

from __future__ import annotations

import json
from functools import lru_cache

from tests.conftest import REPO

SCHEMAS = REPO / "docs" / "schema"
#: The schema of each section of docs/json-contracts.md whose name is not its command's.
SECTION_SCHEMAS = {"rebuild-manifest DB_DIR --out NEW_DB --json": "rebuild-manifest-db"}


def schema_name(section: str) -> str:
    """The schema file (without ``.json``) of a docs/json-contracts.md section ``"<command> <arguments>"``."""
    return SECTION_SCHEMAS.get(section, section.split()[0])


@lru_cache(maxsize=None)
def _validator(name: str):
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    schemas = [json.loads(path.read_text()) for path in sorted(SCHEMAS.glob("*.json"))]
    registry = Registry().with_resources((schema["$id"], Resource.from_contents(schema)) for schema in schemas)
    (schema,) = [s for s in schemas if s["$id"].endswith(f"/{name}.json")]
    return Draft202012Validator(schema, registry=registry)


def schema_problems(document, name: str) -> list[str]:
    """Where ``document`` breaks docs/schema/``name``.json (``[]`` when it follows it)."""
    return [f"{'/'.join(map(str, error.absolute_path)) or '$'}: {error.message}"
            for error in _validator(name).iter_errors(document)]
