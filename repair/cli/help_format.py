"""How ``repair --help`` names arguments and options: as click always did, whatever typer's version.

typer 0.2x labels every parameter with its Python type: ``<bool>`` beside flags such as ``--help`` and
``--install-completion`` that take no value, ``<str>`` beside each path argument, and usage lines such
as ``repair verify [OPTIONS] {path}``. :func:`use_plain_names` restores the plain forms: a flag shows
no value, a text argument no type, and the usage line ``repair verify [OPTIONS] PATH``. Typer versions
without these labels are left as they are.
"""

from __future__ import annotations

from typer import core


def use_plain_names() -> None:
    """Patch typer's labels (idempotent)."""
    option, argument = core.TyperOption, core.TyperArgument
    if getattr(option, "_plain_names", False):
        return
    option._plain_names = True
    if hasattr(option, "display_type_rich"):
        option_type = option.display_type_rich

        def flag_type(self, ctx):
            return None if self.is_flag and self.metavar is None else option_type(self, ctx)

        option.display_type_rich = flag_type
    if hasattr(argument, "display_type_rich") and hasattr(argument, "bare_type"):
        argument_type = argument.display_type_rich

        def text_type(self, ctx):
            return None if self.metavar is None and self.bare_type() == "str" else argument_type(self, ctx)

        argument.display_type_rich = text_type
    if hasattr(argument, "_usage_display_name"):

        def usage_name(self) -> str:
            name = (self.metavar or self.name or "").upper()
            name = name if self.required else f"[{name}]"
            return name + ("..." if self.nargs != 1 else "")

        argument._usage_display_name = usage_name
