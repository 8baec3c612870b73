"""A Flink configuration as flat ``{dotted key: value}`` text, whatever form it was given in.

``flink-conf.yaml`` (flat ``key: value`` lines, which are not always valid YAML), Flink 1.19+'s nested
``config.yaml``, a Kubernetes ``FlinkDeployment`` (``spec.flinkConfiguration``), or ``-D key=value``
arguments. Pure: text in, ``(format, config)`` out; :mod:`repair.ops.doctor.lint` checks the result.
"""

from __future__ import annotations

import re
import shlex
from typing import NamedTuple

import yaml

from repair.errors import UsageError

#: The first segment of every Flink configuration key family (``state.backend.type``, ``execution.*``...):
#: a text none of whose keys starts so is no Flink configuration.
FLINK_KEY_FAMILIES = frozenset({
    "akka", "blob", "classloader", "client", "cluster", "env", "execution", "external-resources", "fs", "heartbeat",
    "high-availability", "historyserver", "io", "jobmanager", "jobstore", "kubernetes", "metrics", "parallelism", "pekko",
    "pipeline", "process", "python", "queryable-state", "resourcemanager", "rest", "restart-strategy", "s3", "security",
    "slot", "slotmanager", "sql-gateway", "state", "table", "task", "taskmanager", "web", "yarn", "zookeeper",
})


def check_is_flink_config(text: str, config: dict[str, str]) -> None:
    """Raise :class:`~repair.errors.UsageError` for text that is no Flink configuration (binary data,
    a document, a log): linting it would report every hazard's default as if it were configured."""
    if "\0" in text or text.count("\ufffd") > 8:
        raise UsageError("not a Flink configuration: the input is binary (expected flink-conf.yaml, config.yaml, a FlinkDeployment or -D key=value)")
    if not any(key.split(".", 1)[0] in FLINK_KEY_FAMILIES for key in config):
        raise UsageError("not a Flink configuration: no Flink option in it (expected flink-conf.yaml, config.yaml, "
                         "a FlinkDeployment or -D key=value, with keys such as state.backend.type)")


_DYNAMIC = re.compile(r"(?:^|\s)-D\s*([^\s=]+)=")


class ParsedConfig(NamedTuple):
    format: str  # "flat-yaml", "nested-yaml", "flink-deployment" or "dynamic-properties"
    config: dict[str, str]  # dotted key -> the value as the user wrote it
    #: A FlinkDeployment's ``spec.flinkVersion`` as a version (``v1_20`` -> ``1.20``), else None.
    flink_version: str | None = None


def parse_config(text: str) -> ParsedConfig:
    """The configuration in ``text``, its values kept as text: YAML scalars are not typed (a job id
    ``00000000000000000000000000000001`` stays that, not the number 1; ``on`` stays ``on``)."""
    if _DYNAMIC.search(text):
        return ParsedConfig("dynamic-properties", _parse_dynamic(text))
    try:
        document = yaml.load(text, Loader=yaml.BaseLoader)  # noqa: S506 - BaseLoader builds only str, list, dict
    except yaml.YAMLError:
        return ParsedConfig("flat-yaml", _parse_lines(text))
    if not isinstance(document, dict):
        if document in (None, "") or isinstance(document, str):
            return ParsedConfig("flat-yaml", _parse_lines(text))
        raise UsageError("not a Flink configuration: expected key: value lines, YAML or -D key=value")
    spec = document.get("spec") if isinstance(document.get("spec"), dict) else None
    if spec is not None and isinstance(spec.get("flinkConfiguration"), dict):
        return ParsedConfig("flink-deployment", _flatten(spec["flinkConfiguration"]), _deployment_version(spec.get("flinkVersion")))
    nested = any(isinstance(v, dict) for v in document.values())
    return ParsedConfig("nested-yaml" if nested else "flat-yaml", _flatten(document))


def _deployment_version(value) -> str | None:
    """The Flink Kubernetes operator's ``FlinkVersion`` enum (``v1_20``, ``v2_1``) as ``1.20``, ``2.1``."""
    match = re.fullmatch(r"v(\d+)_(\d+)", value.strip()) if isinstance(value, str) else None
    return f"{match[1]}.{match[2]}" if match else None


def _parse_dynamic(text: str) -> dict[str, str]:
    try:
        tokens = shlex.split(text, comments=True)
    except ValueError:
        tokens = text.split()
    config: dict[str, str] = {}
    pending = False
    for token in tokens:
        if token == "-D":
            pending = True
            continue
        if token.startswith("-D") or pending:
            body = token[2:] if token.startswith("-D") else token
            if "=" in body:
                key, value = body.split("=", 1)
                config[key.strip()] = value.strip()
        pending = False
    return config


def _parse_lines(text: str) -> dict[str, str]:
    config = {}
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#") or ":" not in line:
            continue
        key, value = line.split(":", 1)
        config[key.strip()] = _scalar(value.strip().strip("'\""))
    return config


def _flatten(mapping: dict, prefix: str = "") -> dict[str, str]:
    flat: dict[str, str] = {}
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, name + "."))
        else:
            flat[name] = _scalar(value)
    return flat


def _scalar(value) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return ",".join(_scalar(v) for v in value)
    return str(value).strip()
