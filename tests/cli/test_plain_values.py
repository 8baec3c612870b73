"""repair.cli.plain_values converts a command-line value without pydantic only to what typer's own
(pydantic) converter returns for it, and leaves every value typer would refuse to typer."""

from __future__ import annotations

import pytest
import typer.main

from repair.cli import plain_values
from repair.cli.app import app

# typer before 0.2x converts values with click's types: nothing of this module is used then
build_runtime_param = pytest.importorskip("typer._coercion", reason="typer without its pydantic layer").build_runtime_param
BadParameter = pytest.importorskip("typer._click.exceptions").BadParameter

#: Values as the command line gives them: whole numbers, bounds, decimals, signs, spaces, choices, lists.
VALUES = ["3", "0", "1", "007", "32768", "32769", "-1", "+2", " 4", "1_000", "2.5", "1e3", "abc", "", "state", "STATE",
          "key-group", "zstd", "frocksdb8", ("a", "b"), ["x"], ("a", 1), b"bytes"]


def _parameters():
    group = typer.main.get_command(app)
    yield from (("repair", param) for param in group.params)
    for name, command in group.commands.items():
        yield from ((name, param) for param in command.params)


def test_plain_conversions_equal_typers_and_refusals_stay_typers():
    plain_count = 0
    for command, param in _parameters():
        descriptor = param.type_descriptor
        for value in VALUES:
            plain = plain_values._plain(descriptor.annotation, descriptor.parameter_info, value)
            try:
                expected = build_runtime_param(descriptor)._coerce_value(value, param=param, ctx=None)
            except BadParameter:
                assert plain is plain_values._NOT_PLAIN, (command, param.name, value)
                continue
            if plain is not plain_values._NOT_PLAIN:
                plain_count += 1
                assert (type(plain), plain) == (type(expected), expected), (command, param.name, value)
    assert plain_count > 100  # the plain path is the one valid values take


@pytest.mark.parametrize("annotation_of", ["workers", "retry_budget", "by", "operator", "path"])
def test_every_kind_of_parameter_has_a_plain_path(annotation_of):
    params = {param.name: param for _, param in _parameters()}
    descriptor = params[annotation_of].type_descriptor
    value = {"workers": "2", "retry_budget": "2.5", "by": "file", "operator": ("a",), "path": "/x"}[annotation_of]
    assert plain_values._plain(descriptor.annotation, descriptor.parameter_info, value) is not plain_values._NOT_PLAIN
