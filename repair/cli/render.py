"""Human output of each command's result: concise rich tables. ``--json`` output is ``to_json()``.

Names, paths and messages are data: the stdout console interprets no markup (a uid like ``[/x]`` or a
SQL operator name ``select=[user]`` prints as it is). The lines that style text say ``markup=True`` and
pass every piece of data through ``escape``; styled table cells are :func:`_styled` ``Text``.
"""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from repair.cli.output import stdout
from repair.formats.flink.keygroups import operator_label
from repair.io.storage import parent


def _styled(markup: str) -> Text:
    """A table cell styled with constant markup (never with data in it)."""
    return Text.from_markup(markup)


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def render_inspect(result, *, show_files: bool = False, show_subtasks: bool = False) -> None:
    console = stdout()
    kind = result.kind if not result.savepoint_format else f"{result.kind} ({result.savepoint_format})"
    console.print(f"[bold]{escape(kind)} {result.checkpoint_id}[/]  metadata v{result.metadata_version}  "
                  f"{human_bytes(result.metadata_bytes)}", markup=True)
    console.print(f"  {result.metadata_path}")
    if result.written_at is not None:
        import time

        written = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(result.written_at))
        console.print(f"  written {written} ({_human_age(time.time() - result.written_at)} ago; the _metadata file's time)", highlight=False)
    if len(result.retained_checkpoints) > 1:
        console.print(f"  retained here: {', '.join(map(str, result.retained_checkpoints))}")
    for recorded, actual in result.relocated_from.items():
        console.print(f"  [yellow]relocated:[/] written at {escape(recorded)}, read at {escape(actual)}", markup=True)
    for uid in result.unmatched_uids:
        console.print(f"  [yellow]no operator with uid {escape(repr(uid))}[/]", markup=True)

    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, padding=(0, 2, 0, 0))
    for column in ("operator", "id", "par/max", "key groups", "states", "files", "inline", "external"):
        table.add_column(column, justify="right" if column in ("inline", "external") else "left", overflow="fold")
    problems = []
    for op in result.operators:
        label = op.label + (" (--uid)" if op.uid_from_argument else "")
        states = _unique_states(op)
        ranges = [s.key_group_range for s in op.subtasks if s.key_group_range]
        key_groups = f"{min(r[0] for r in ranges)}-{max(r[1] for r in ranges)}" if ranges else ""
        files = [f for s in op.subtasks for f in s.files]
        external = [f for f in files if not f.inline]
        inline = [f for f in files if f.inline]
        if op.fully_finished:
            states_text = "finished"
        else:
            states_text = ", ".join(f"{name} ({kind})" for name, kind in states) or "no state"
        table.add_row(
            label,
            op.id[:8],
            f"{op.parallelism}/{op.max_parallelism}",
            key_groups,
            states_text,
            f"{len(external)} + {len(inline)} inline",
            human_bytes(sum(f.size for f in inline)),
            human_bytes(sum(f.size for f in external)),
        )
        for sub in op.subtasks:
            problems += [f"{op.label}[{sub.index}]: {p}" for p in sub.problems]
    console.print()
    console.print(table)
    console.print(
        f"total: {len(result.operators)} operators, inline {human_bytes(result.inline_bytes)}, "
        f"external {human_bytes(result.external_bytes)}"
    )
    for finding in result.metadata_findings:
        console.print(f"[red]{escape(result.metadata_path)}: {escape(finding.message)}[/]", markup=True)
    for problem in problems:
        console.print(f"[red]{escape(problem)}[/]", markup=True)
    if show_subtasks:
        _render_subtasks(result)
    if show_files:
        _render_files(result)


def _unique_states(op) -> list[tuple[str, str]]:
    """``(name, kind with key and value types)`` of each state of ``op``, once."""
    seen: dict[str, str] = {}
    for sub in op.subtasks:
        for state in sub.states:
            seen.setdefault(state.name, state.describe())
    return list(seen.items())


def _render_subtasks(result) -> None:
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, padding=(0, 2, 0, 0))
    for column in ("operator", "subtask", "key groups", "handle", "states", "files", "bytes"):
        table.add_column(column, overflow="fold")
    for op in result.operators:
        for sub in op.subtasks:
            kg = f"{sub.key_group_range[0]}-{sub.key_group_range[1]}" if sub.key_group_range else ""
            table.add_row(
                op.label,
                str(sub.index),
                kg,
                "finished" if sub.finished else (sub.handle or ""),
                str(len(sub.states)),
                str(len(sub.files)),
                human_bytes(sum(f.size for f in sub.files)),
            )
    stdout().print()
    stdout().print(table)


def _render_files(result) -> None:
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, padding=(0, 2, 0, 0))
    for column in ("operator", "subtask", "role", "local name", "size", "location"):
        table.add_column(column, justify="right" if column == "size" else "left", overflow="fold")
    for op in result.operators:
        for sub in op.subtasks:
            for f in sub.files:
                where = "inline" if f.inline else (f.path + (" (relocated)" if f.relocated else ""))
                table.add_row(op.label, str(sub.index), f.role, f.local_name or "", str(f.size), where)
    stdout().print()
    stdout().print(table)


def render_verify(result) -> None:
    console = stdout()
    checked = result.to_json()["checked"]
    status = "[bold green]OK[/]" if result.ok else f"[bold red]{sum(1 for _ in _groups(result))} problem(s)[/]"
    console.print(
        f"verified {checked['checkpoints']} snapshot(s), {checked['files']} files, {human_bytes(checked['bytes'])}, "
        f"{checked['blocks']} blocks: {status}", markup=True,
    )
    if checked["bytes_without_checksum"]:
        console.print(f"{human_bytes(checked['bytes_without_checksum'])} of them carry no checksum (key groups, operator state or "
                      "changelogs written without snapshot compression): every record was decoded, but a changed byte "
                      "inside a value cannot be seen")
    if result.unknown:
        console.print("[yellow]some files could not be read (a storage fault, not damage): those verdicts are unknown; "
                      f"retry when the store answers, e.g. repair --retry-budget 600 verify {escape(result.path)}[/]", markup=True)
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, padding=(0, 2, 0, 0))
    for column in ("snapshot", "id", "kind", "status"):
        table.add_column(column)
    for snap in result.snapshots:
        table.add_row(snap.name, "" if snap.checkpoint_id is None else str(snap.checkpoint_id), snap.kind,
                      _styled({"ok": "[green]ok[/]", "broken": "[red]broken[/]", "unknown": "[yellow]unknown (unreadable)[/]"}.get(snap.verdict, "not checked")))
    console.print(table)
    root = result.path
    for severity, first, snapshots in _groups(result):
        colour = "red" if severity == "error" else "yellow"
        line = first.describe(root)
        line = line[len(first.reference.snapshot) + 1 :] if line.startswith(first.reference.snapshot + " ") else line
        console.print(f"[{colour}]{severity.upper():7}[/] {escape(line)}", markup=True, highlight=False)
        console.print(f"         in {', '.join(snapshots)}")
    from repair.ops.advice import verify_next_steps

    _next_steps(console, verify_next_steps(result))


def _next_steps(console, steps: list[str]) -> None:
    """The advice that ends a command's text output."""
    if steps:
        console.print("\n[bold]next[/]", markup=True)
    for step in steps:
        console.print(f"  {step}", highlight=False, markup=False, soft_wrap=True)  # commands in it paste as one line


def _command(console, prefix: str, command) -> None:
    """One command line (a :class:`~repair.ops.advice.Command`) after ``prefix``: never wrapped, so it pastes."""
    console.print(f"{prefix}{command.to_shell()}", highlight=False, markup=False, soft_wrap=True)


def _age_of(written_at: float | None, now: float, source: str | None = None) -> str:
    """An age, marked ``*`` when it is a file's modification time (which a copy resets)."""
    from repair.ops.verify.engine import AGE_FROM_FILE_TIME  # loaded already: the ages come from its results

    if written_at is None:
        return "?"
    return _human_age(max(0.0, now - written_at)) + (" *" if source == AGE_FROM_FILE_TIME else "")


def _print_age_sources(console, sources) -> None:
    """Say where the ages in a table come from."""
    from repair.ops.verify.engine import AGE_FROM_FILE_TIME, AGE_FROM_SST

    sources = set(sources)
    if AGE_FROM_SST in sources:
        console.print("  age: from the creation time RocksDB recorded in the snapshot's newest SST (kept by copies)", highlight=False)
    if AGE_FROM_FILE_TIME in sources:
        console.print("  * age from the _metadata file's modification time (no SST time was read): a copy resets it", highlight=False)


def _groups(result):
    """Findings of one physical problem, with the snapshots that reference it."""
    groups: dict = {}
    for finding in result.findings:
        entry = groups.setdefault(finding.group_key(), (finding.severity, finding, []))
        if finding.reference.snapshot not in entry[2]:
            entry[2].append(finding.reference.snapshot)
    return list(groups.values())


def render_fallback(result) -> None:
    console = stdout()
    if result.chosen is not None:
        console.print(f"[bold green]{escape(result.message)}[/]: {escape(result.chosen.path)}", markup=True, soft_wrap=True)
    else:
        console.print(f"[bold red]{escape(result.message)}[/]", markup=True, soft_wrap=True)
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, padding=(0, 2, 0, 0))
    import time

    now = time.time()
    for column in ("checkpoint", "id", "age", "lineage", "status", "first culprit"):
        table.add_column(column, overflow="fold")
    for verdict in result.checkpoints:
        chosen = result.chosen is not None and verdict is result.chosen
        status = _styled("[bold green]chosen[/]" if chosen else (
            {"valid": "[green]valid[/]", "broken": "[red]broken[/]", "unknown": "[yellow]unknown (unreadable)[/]"}.get(verdict.verdict, "not checked")
        ))
        first = verdict.culprits[0] if verdict.culprits else None
        culprit = f"{first.local_name or ''} {first.kind}" + (f" (+{len(verdict.culprits) - 1} more)" if len(verdict.culprits) > 1 else "") if first else ""
        table.add_row(verdict.name, "" if verdict.checkpoint_id is None else str(verdict.checkpoint_id),
                      _age_of(verdict.written_at, now, verdict.age_source), str(verdict.lineage), status, culprit)
    console.print(table)
    _print_age_sources(console, (v.age_source for v in result.checkpoints if v.written_at is not None))
    if result.damaged:
        console.print("\n[bold]why[/]", markup=True)
        for damage in result.damaged:
            console.print(f"  {damage.explain()}", highlight=False)
    if len(result.lineages) > 1:
        console.print("\n[bold]lineages[/] (checkpoints of different jobs or deployments in one directory)", markup=True)
        for lineage in result.lineages:
            console.print(f"  {lineage.index}: {', '.join(lineage.checkpoints)}  ({lineage.reason})")
    if result.lost:
        console.print("\n[bold]cannot be restored from the newest checkpoint[/]", markup=True)
        for line in result.lost:
            console.print(f"  {line}", highlight=False, markup=False, soft_wrap=True)
    if result.restore is not None:
        console.print("\n[bold]how to restore[/]", markup=True)
        for command in result.restore.commands:
            _command(console, "  ", command)
        console.print("  or in the Flink configuration:")
        for line in result.restore.config:
            console.print(f"    {line}", highlight=False, markup=False, soft_wrap=True)
        for note in result.restore.notes:
            console.print(f"  {note}")
    from repair.ops.advice import fallback_next_steps

    _next_steps(console, fallback_next_steps(result))


def render_triage(result) -> None:
    """The ways back, best first: a table, then each way's commands in order and what it loses."""
    console = stdout()
    colour = "green" if result.ok else ("yellow" if result.ways and not result.undecided else "red")
    console.print(f"[bold {colour}]{escape(result.message)}[/]", highlight=False, markup=True, soft_wrap=True)
    checked = result.checked
    console.print(f"  {checked['checkpoints']} retained checkpoint(s) and {checked['savepoints']} savepoint(s) verified, "
                  f"{checked['files']} files, {human_bytes(checked['bytes'])}", highlight=False)
    if result.ways:
        table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, padding=(0, 2, 0, 0))
        for column in ("#", "way back", "snapshot", "age", "loses"):
            table.add_column(column, overflow="fold")
        for way in result.ways:
            loses = "nothing" if way.lossless else f"{len(way.lost)} SST file(s) of state"
            age = "unknown" if way.written_at is None else _age_of(way.written_at, way.written_at + way.age_seconds, way.age_source)
            table.add_row(str(way.rank), way.action, way.snapshot + (f" (lineage {way.lineage})" if way.lineage is not None else ""), age, loses)
        console.print(table)
        _print_age_sources(console, (way.age_source for way in result.ways if way.age_seconds is not None))
    for way in result.ways:
        console.print(f"\n[bold]{way.rank}. {way.action} {escape(way.snapshot)}[/]: {escape(way.why)}", highlight=False, markup=True)
        for line in way.loss_lines():
            console.print(f"  lost: {line}", highlight=False, markup=False)
        for step, command in enumerate(way.commands, 1):
            _command(console, f"  {step}) ", command)
        for command in way.alternatives:
            _command(console, "     or ", command)
    if len(result.lineages) > 1:
        console.print("\n[bold]lineages[/] (checkpoints of different jobs or deployments in one directory)", markup=True)
        for lineage in result.lineages:
            console.print(f"  {lineage.index}: {', '.join(lineage.checkpoints)}  ({lineage.reason})", highlight=False)
    if result.beyond_repair:
        console.print("\n[bold]beyond repair[/] (broken checkpoints newer than every way back, broken savepoints)", markup=True)
        for broken in result.beyond_repair:
            console.print(f"  {broken.snapshot}: {'; '.join(broken.reasons[:3])}"
                          + (f" (+{len(broken.reasons) - 3} more)" if len(broken.reasons) > 3 else ""), highlight=False, markup=False)
    if result.ways:
        console.print("\nRestore in NO_CLAIM mode: the new job never deletes files of the snapshot it starts from, so the "
                      "other ways back stay available. Runbook: repair runbook triage", highlight=False)


def render_orphans(result) -> None:
    """Orphans of a job root: one row per file, then totals; says how to delete, never deletes."""
    import time

    console = stdout()
    totals = result.to_json()["totals"]
    orphaned = totals["orphans"]
    console.print(
        f"[bold]{orphaned['files']} orphan file(s), {human_bytes(orphaned['bytes'])}[/] in shared/ and taskowned/ "
        f"(of {totals['shared_and_taskowned']['files']} files)", markup=True,
    )
    console.print(f"  retained: {', '.join(f'chk-{n}' for n in result.retained_checkpoints)}")
    if result.incomplete_checkpoints:
        console.print(f"  [yellow]without _metadata[/] (in progress, failed or half deleted): {escape(', '.join(result.incomplete_checkpoints))}",
                      markup=True)
    now = time.time()
    if result.orphans:
        table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, padding=(0, 2, 0, 0))
        for column in ("orphan", "size", "age", "note"):
            table.add_column(column, justify="right" if column in ("size", "age") else "left", overflow="fold")
        for orphan in result.orphans:
            age = "?" if orphan.mtime is None else _human_age(now - orphan.mtime)
            table.add_row(orphan.relative_path, human_bytes(orphan.size), age, _orphan_note(orphan))
        console.print()
        console.print(table)
    referenced, retained = totals["referenced"], totals["retained_checkpoints"]
    console.print(
        f"total: orphans {orphaned['files']} files, {human_bytes(orphaned['bytes'])}; "
        f"referenced {referenced['files']} files, {human_bytes(referenced['bytes'])}; "
        f"retained checkpoints {retained['checkpoints']}, {retained['files']} files, {human_bytes(retained['bytes'])}"
    )
    if referenced["missing"]:
        from repair.ops.advice import repair_command

        verify, triage = (escape(repair_command(name, result.root).to_shell()) for name in ("verify", "triage"))
        console.print(f"[red]{referenced['missing']} referenced file(s) missing[/]: `{verify}` says which; "
                      f"`{triage}` ranks the ways back", markup=True, soft_wrap=True)
    if result.orphans:
        console.print(
            "Nothing was deleted. Delete orphans only with the job stopped, or only those older than the oldest "
            "retained _metadata, never while a checkpoint is in progress (docs/commands/orphans.md)."
        )


def _orphan_note(orphan) -> str | Text:
    if orphan.could_be_needed_by is not None:
        return Text(f"newer than the newest _metadata: may belong to {orphan.could_be_needed_by}", style="yellow")
    if orphan.older_than_retained:
        return "older than every retained checkpoint"
    return "subsumed or failed checkpoint (delete only with the job stopped)"


def _human_age(seconds: float) -> str:
    """``42 s``, ``17 min``, ``5 h``, ``3 d`` (negative ages, from clock skew, read ``0 s``)."""
    seconds = max(seconds, 0)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size:.0f} {unit}"
    return f"{seconds:.0f} s"


def render_relocate(result) -> None:
    console = stdout()
    if not result.ok:
        console.print(f"[bold red]not relocated: {len(result.missing)} file(s) missing or short; nothing was written[/]", markup=True)
        for missing in result.missing:
            console.print(f"  {missing.source}: {missing.found}, _metadata records {missing.expected_size} bytes (recorded as {missing.recorded})")
        return
    copied = [f for f in result.files if f.copied]
    console.print(f"[bold green]wrote {escape(result.new_metadata)}[/]", markup=True)
    console.print(
        f"  {len(result.files)} files checked; {len(copied)} copied ({human_bytes(sum(f.size for f in copied))}); "
        f"{len(result.files) - len(copied)} referenced where they are"
    )
    for damaged in (f for f in result.files if f.damaged_path):
        console.print(f"  damaged path rewritten: {damaged.recorded} -> {damaged.target}", highlight=False, markup=False)
    _restore_lines(console, parent(result.new_metadata), 4)  # format 4 is restored by both the 1.15-1.19 and the 1.20+ lines


def render_write_savepoint(result) -> None:
    console = stdout()
    console.print(f"[bold green]wrote {escape(result.metadata)}[/] (canonical savepoint, _metadata version {result.metadata_version})",
                  markup=True)
    for op in result.operators:
        what = f"{sum(s.entries for s in op.states)} entries in {len(op.states)} keyed states" if op.keyed else "no keyed state"
        copied = f"; copied {len(op.copied)} handle(s)" if op.copied else ""
        console.print(f"  {op.uid or op.operator_id}: parallelism {op.parallelism}, max parallelism {op.max_parallelism}, {what}{copied}",
                      highlight=False, markup=False)
    _restore_lines(console, parent(result.metadata), result.metadata_version)


def _restore_lines(console, path: str, version: int) -> None:
    """How to restore the snapshot just written, per Flink release."""
    from repair.ops.advice import restore_commands

    for i, command in enumerate(restore_commands(path, version)):
        _command(console, "  restore with: " if i == 0 else "            or: ", command)


def render_edit(result) -> None:
    console = stdout()
    for change in result.edits:
        console.print(f"  {change.action}: {change.detail} (operator {change.operator_id})", highlight=False, markup=False)
    render_relocate(result.written)


def _render_unrepairable(result, headline: str) -> bool:
    """The problems that kept a rebuild from writing anything, and the hint; False when there are none."""
    if not result.unrepairable:
        return False
    console = stdout()
    console.print(f"[bold red]{escape(headline)}[/]", markup=True)
    for line in result.unrepairable:
        console.print(f"  {line}", highlight=False, markup=False)
    if result.hint:
        console.print(f"[yellow]{escape(result.hint)}[/]", markup=True)
    return True


def render_rebuild(result) -> None:
    console = stdout()
    if _render_unrepairable(result, "not rebuilt: these problems are not in a MANIFEST or CURRENT; nothing was written"):
        return
    if not result.rebuilt and not result.replaced:
        console.print("[yellow]every MANIFEST and CURRENT is sound; the new checkpoint is a relocated copy[/]", markup=True)
    for inst in result.rebuilt:
        levels = sorted(set(inst.levels.values()))
        dropped = f" ({len(inst.dropped)} dropped)" if inst.dropped else ""
        placed = f", placed on {'level' if len(levels) == 1 else 'levels'} {', '.join(map(str, levels))}" if levels else ""
        console.print(
            f"rebuilt {inst.manifest_name} for {operator_label(inst.operator)}[{inst.subtask}]: {inst.sst_files} SSTs{dropped} "
            f"in {len(inst.column_families)} column families{placed}  "
            f"(because: {'; '.join(inst.reasons)})"
            + (f"; wrote {inst.options_written} from the SST properties" if inst.options_written else ""),
            highlight=False, markup=False,
        )
    if result.replaced:
        _render_replaced(result.replaced)
    for note in result.older.notes if result.older is not None else []:
        console.print(f"  --older: {note}", highlight=False, markup=False)
    if result.salvaged:
        _render_salvaged(result.salvaged)
    if result.lost:
        _render_lost(result.lost)
    if result.written is not None:
        render_relocate(result.written)
        if result.output_verified is not None:
            status = "[green]clean[/]" if result.output_verified else "[red]NOT clean: run repair verify on it[/]"
            console.print(f"  repair verify of the new checkpoint: {status}", markup=True)
        if (result.lost or result.salvage_lost) and result.written.ok:
            console.print("  [yellow]restoring it loses the state above (exit code 1: written with losses)[/]", markup=True)


def _file_table(headline: str, columns: tuple[str, ...], *, right: tuple[str, ...]) -> Table:
    """A blank line and ``headline`` printed, and an empty table of one row per SST file (``right`` columns right-aligned)."""
    console = stdout()
    console.print()
    console.print(headline, markup=True)
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, padding=(0, 2, 0, 0))
    for column in columns:
        table.add_column(column, justify="right" if column in right else "left", overflow="fold")
    return table


def _render_replaced(replaced) -> None:
    """The table of damaged or missing SSTs replaced by their intact originals from ``--older`` sources."""
    console = stdout()
    table = _file_table(f"[bold green]{len(replaced)} SST file(s) replaced by their intact original (--older), nothing lost:[/]",
                        ("subtask", "file", "why", "state", "from", "checkpoint"), right=("checkpoint",))
    for item in replaced:
        table.add_row(f"{operator_label(item.operator)}[{item.subtask}]", item.local_name, item.reason, item.column_family or "?",
                      f"{item.source.directory} {item.copy_local_name}", str(item.source.checkpoint_id))
    console.print(table)
    for item in replaced:
        console.print(f"  {item.local_name}: {item.evidence}", highlight=False, markup=False, soft_wrap=True)


def _render_salvaged(salvaged) -> None:
    """The table of SSTs a ``--salvage`` rebuild replaced by their salvaged copies, and what each lost."""
    console = stdout()
    table = _file_table(f"[bold]{len(salvaged)} damaged SST file(s) salvaged block by block (--salvage):[/]",
                        ("subtask", "file", "state", "how", "kept", "lost", "key groups lost", "checked"), right=("kept", "lost"))
    for item in salvaged:
        lost = "?" if item.entries_lost is None else str(item.entries_lost)
        if item.range_deletions_lost:
            lost += f" + {item.range_deletions_lost} range deletion(s)"
        groups = "-".join(map(str, item.key_groups)) if item.key_groups else "-"
        checked = "verify" + (", sst_dump" if item.sst_dump_verified else f" (sst_dump: {item.sst_dump_detail})")
        table.add_row(f"{operator_label(item.operator)}[{item.subtask}]", item.local_name, item.column_family, item.method,
                      str(item.entries_kept), lost, groups, checked)
    console.print(table)
    for item in salvaged:
        where = f"{operator_label(item.operator)}[{item.subtask}] {item.local_name}"
        for block in item.lost:
            after = _boundary(block.after) if block.after else "the first key"
            up_to = _boundary(block.up_to) if block.up_to else "the last key"
            count = "?" if block.entries is None else str(block.entries)
            console.print(f"  {escape(where)}: {count} entries lost after {escape(after)} up to {escape(up_to)}", highlight=False, markup=True)
        older = [o.local_name for o in item.overlaps if o.relation in ("older", "both")]
        if older:
            console.print(f"  [yellow]{escape(where)}: keys of the lost blocks that {', '.join(older)} also hold come back with "
                          "their OLDER values (or reappear after a deletion)[/]", highlight=False, markup=True)
        _render_lost_keys(where, item.lost_keys)


def _render_lost(lost) -> None:
    """The table of SSTs a rebuild left out whole (``--drop-missing``; with ``--salvage``, the missing files
    and those none of whose data blocks is sound), and what dropping each does."""
    console = stdout()
    table = _file_table(f"[bold yellow]DATA LOST: {len(lost)} SST file(s) left out whole; what they held:[/]",
                        ("subtask", "file", "why", "state", "key groups", "keys (first .. last)", "seqnos", "entries"), right=("entries",))
    for item in lost:
        groups = "-".join(map(str, item.key_groups)) if item.key_groups else "unknown"
        keys = f"{_boundary(item.smallest)} .. {_boundary(item.largest)}" if item.smallest else "unknown"
        seqnos = f"{item.smallest_seqno}-{item.largest_seqno}" if item.smallest_seqno is not None else "?"
        why = item.reason + (f" at offset {item.offset}" if item.offset is not None else "")
        table.add_row(
            f"{operator_label(item.operator)}[{item.subtask}]", item.local_name, why,
            item.column_family or "unknown", groups, keys, seqnos, "?" if item.entries is None else str(item.entries),
        )
    console.print(table)
    for item in lost:
        where = f"{operator_label(item.operator)}[{item.subtask}] {item.local_name}"
        if item.range_unknown:
            console.print(f"  {where}: key range unknown: {item.range_unknown}", highlight=False)
        for warning in item.warnings():
            console.print(f"  [yellow]{escape(where)}: {escape(warning)}[/]", highlight=False, markup=True)
        _render_lost_keys(where, item.lost_keys)


def _render_lost_keys(where: str, lost_keys) -> None:
    """``--list-lost-keys``: one line per lost entry's key and what it shows after the restore."""
    if lost_keys is None or (lost_keys.complete and not lost_keys.keys):
        return
    console = stdout()
    fates = {"lost": "lost", "older_value_back": "older value back from {}", "newer_kept": "not lost: a newer version in {}"}
    extent = "all of them" if lost_keys.complete else "those known"
    console.print(f"  {escape(where)}: keys of the lost entries ({extent}; from {escape(lost_keys.source)}):",
                  highlight=False, markup=True)
    for key in lost_keys.keys:
        fate = fates[key.fate].format(key.other_file)
        older = f"; {key.older.describe()}" if key.older is not None else ""
        console.print(f"    {escape(_boundary(key.key))}  (key group {key.key.key_group}): {fate}{escape(older)}", highlight=False, markup=True,
                      soft_wrap=bool(older))  # a source's path stays whole on one line


def _boundary(boundary) -> str:
    """A range end as the Flink key when decoded, else its raw user key in hex."""
    import json

    from repair.formats.flink.in_rocksdb.key_range import plain

    if boundary.key is not None:
        return json.dumps(plain(boundary.key), ensure_ascii=False)
    return "0x" + boundary.user_key.hex()




def render_rebuild_db(result) -> None:
    """``repair rebuild-manifest DB_DIR``: what the new DB holds, where each decision came from, what was left out."""
    console = stdout()
    if _render_unrepairable(result, "not rebuilt: nothing was written"):
        return
    files = sum(len(cf.files) for cf in result.column_families)
    console.print(f"[bold green]rebuilt {escape(result.new_db or '')}[/]: {escape(str(result.manifest_name))} with {files} SSTs in "
                  f"{len(result.column_families)} column families, MANIFEST format {escape(str(result.format))}", highlight=False, markup=True)
    for line in result.format_evidence:
        console.print(f"  [dim]{escape(line)}[/]", highlight=False, markup=True)
    old = result.old_manifest
    state = old.state + (f" ({old.name})" if old.name else "") + (f": {old.detail}" if old.detail else "")
    console.print(f"  CURRENT: {result.current or '-'}; old MANIFEST: {state}", highlight=False)
    options = result.options
    if options.action == "kept":
        note = " without its wal_dir" if options.removed_wal_dir else ""
        note += f", sections added for {', '.join(options.appended)}" if options.appended else ""
        console.print(f"  OPTIONS: kept {options.name}{note}", highlight=False)
    else:
        console.print(f"  OPTIONS: wrote {options.name} from the SST properties ({options.why or ''})", highlight=False)
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, padding=(0, 2, 0, 0))
    for column in ("id", "column family", "id from", "SSTs", "levels", "WAL entries"):
        table.add_column(column, justify="right" if column in ("id", "SSTs", "WAL entries") else "left", overflow="fold")
    for cf in result.column_families:
        levels = ", ".join(map(str, sorted(set(cf.files.values())))) or "-"
        table.add_row(str(cf.id), cf.name, cf.id_source, str(len(cf.files)), levels, str(cf.wal_entries or ""))
    console.print(table)
    for wal in result.wals:
        verb = "copied" if wal.included else "left out"
        console.print(f"  WAL {wal.name}: {verb}: {wal.why}", highlight=False)
    for skipped in result.skipped:
        console.print(f"  [dim]not copied: {escape(skipped.name)}: {escape(skipped.why)}[/]", highlight=False, markup=True)
    if result.lost:
        console.print(f"[bold yellow]DATA LOST: {len(result.lost)} item(s) left out (--drop-missing):[/]", markup=True)
        for item in result.lost:
            where = f" (column family {item.column_family}, level {item.level}, seqnos {item.seqnos[0]}-{item.seqnos[1]}, from {item.source})" \
                if item.column_family else ""
            console.print(f"  {item.name}: {item.reason}: {item.message}{where}", highlight=False)
    for warning in result.warnings:
        console.print(f"  [yellow]{escape(warning)}[/]", highlight=False, markup=True)
    console.print(f"  {result.written_files} files written ({human_bytes(result.written_bytes)})")
    if result.output_verified is not None:
        status = "[green]clean[/]" if result.output_verified else "[red]NOT clean: run repair verify on it[/]"
        console.print(f"  repair verify of the new DB: {status}", markup=True)
    if result.lost:
        console.print("  [yellow]it holds less than the original: exit code 1 (written with losses)[/]", markup=True)


def render_diagnose(result) -> None:
    console = stdout()
    if not result.incidents:
        console.print(f"[bold yellow]{escape(result.message)}[/] in {escape(result.source)}", markup=True)
        for line in result.unrecognised:
            console.print(f"  {line}", markup=False)
        console.print("`repair runbook` lists the incident classes repair knows.")
        return
    console.print(f"[bold]{escape(result.message)}[/]", markup=True)
    for incident in result.incidents:
        e = incident.evidence
        colour = "cyan" if incident.kind == "question" else "red"
        times = f" ({incident.count}x)" if incident.count > 1 else ""
        console.print()
        console.print(f"[bold {colour}]{escape(incident.cause_id)}[/]{times}: {escape(incident.cause)}", highlight=False, markup=True)
        facts = []
        if e["operator"] or e["operator_id"]:
            facts.append(f"operator {e['operator'] or ''} {(e['operator_id'] or '')[:8]}".rstrip())
        if e["subtasks"]:
            of = f" of {e['parallelism']}" if e["parallelism"] else ""
            facts.append(f"subtask{'s' if len(e['subtasks']) > 1 else ''} {', '.join(map(str, e['subtasks']))}{of}")
        if e["job_id"]:
            facts.append(f"job {e['job_id']}")
        if e["checkpoint_ids"]:
            facts.append(f"checkpoint {', '.join(map(str, e['checkpoint_ids']))}")
        if e["phase"]:
            facts.append(f"during {e['phase']}")
        if facts:
            console.print(f"  {'; '.join(facts)}", markup=False, highlight=False)
        if e["files"]:
            console.print(f"  files: {', '.join(e['files'])}", markup=False, highlight=False)
        if e["checkpoint_root"]:
            console.print(f"  checkpoint root: {e['checkpoint_root']}", markup=False, highlight=False)
        console.print(f"  runbook: {_runbook_command(incident.runbook)}", markup=False, highlight=False)
        console.print(f"  next:    [bold]{escape(incident.next_command.to_shell())}[/]", highlight=False, markup=True, soft_wrap=True)
        for command in incident.also:
            _command(console, "  also:    ", command)


def render_doctor(result) -> None:
    console = stdout()
    counts = result.counts()
    origin = ", from spec.flinkVersion" if result.flink_version_source == "flink-deployment" else ""
    version = f" (Flink {result.flink_version}{origin})" if result.flink_version else ""
    status = "[bold green]no errors[/]" if result.ok else f"[bold red]{counts['error']} error(s)[/]"
    console.print(f"{escape(result.source)}: {len(result.config)} keys, {result.format}{escape(version)}: {status}, "
                  f"{counts['warning']} warning(s), {counts['info']} note(s)", highlight=False, markup=True)
    colours = {"error": "red", "warning": "yellow", "info": "cyan"}
    for finding in result.findings:
        value = "" if finding.value is None else f" = {finding.value}"
        console.print(f"[{colours[finding.severity]}]{finding.severity.upper():7}[/] "
                      f"{escape(finding.key)}{escape(value)}", highlight=False, markup=True)
        console.print(f"        {finding.why}", markup=False, highlight=False)
        console.print(f"        fix: {finding.fix}", markup=False, highlight=False)
        if finding.runbook:
            console.print(f"        runbook: {_runbook_command(finding.runbook)}", markup=False, highlight=False)


def _value_type(state) -> str:
    """The value column's type, e.g. ``int64``, ``json (Kryo com.x.Y)``, ``+ttl`` for TTL states."""
    if state.kind == "priority-queue":
        return "timers"
    value = state.columns.columns["value"]
    text = f"json ({value.describes})" if value.is_json else value.type_name
    return text + (" +ttl" if state.columns.ttl else "")


def _render_undecoded(console, result) -> None:
    """Export's states none of whose values was decoded, said before the table (an error where decoded
    columns were asked for)."""
    undecoded = result.undecoded
    if not undecoded:
        return
    colour = "red" if not result.ok else "yellow"
    console.print(f"[bold {colour}]{len(undecoded)} state(s) with no value decoded[/] (raw bytes only; each row's "
                  "error column says why):", highlight=False, markup=True)
    for op, state in undecoded:
        console.print(f"  {operator_label(op.label)}/{state.state}: {', '.join(state.raw_fallback)} of {state.rows} rows",
                      highlight=False, markup=False)


def render_export(result) -> None:
    console = stdout()
    snapshot = result.snapshot if not result.savepoint_format else f"{result.snapshot} ({result.savepoint_format})"
    console.print(
        f"[bold green]exported {result.rows} rows[/] of {result.kind} {result.checkpoint_id} ({escape(snapshot)}) "
        f"to {escape(result.out)}: {result.files} Parquet files",
        highlight=False, markup=True,
    )
    _render_undecoded(console, result)
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, padding=(0, 2, 0, 0))
    for column in ("operator", "state", "kind", "rows", "subtasks", "value", "notes"):
        table.add_column(column, justify="right" if column in ("rows", "subtasks") else "left", overflow="fold")
    for op in result.operators:
        for state in op.states:
            notes = []
            if state.raw_fallback:
                notes.append(f"raw bytes only: {', '.join(state.raw_fallback)} ({state.rows_with_errors} rows)")
            if state.outside_key_groups:
                notes.append(f"{state.outside_key_groups} keys outside key groups dropped")
            if state.not_representable:
                notes.append("not representable: " + ", ".join(f"{c} x{n}" for c, n in state.not_representable.items()))
            if state.changelog and state.changelog["changes"]:
                notes.append(f"{state.changelog['changes']} logged changes applied")
            table.add_row(
                operator_label(op.label), state.state, state.kind,
                str(state.rows), str(len(state.rows_per_subtask)), _value_type(state), "; ".join(notes),
            )
    if result.operators:
        console.print(table)
    if result.skipped:
        groups: dict[tuple[str, str, str], list] = {}
        for skipped in result.skipped:  # subtasks skipped for the same reason: one line
            groups.setdefault((skipped.operator, skipped.what, skipped.reason), []).append(skipped)
        console.print(f"[yellow]skipped (not exported): {len(result.skipped)}[/]", markup=True)
        for (operator, what, reason), items in groups.items():
            label = operator_label(operator)
            console.print(f"  {label}: {what} x{len(items)} ({reason})", highlight=False)
    merged = [(op, subtask, engine["reason"]) for op in result.operators for subtask, engine in sorted(op.engines.items())
              if engine.get("engine") == "python" and engine.get("reason")]
    if merged:  # --engine auto fell back: say where and why (a damaged instance, usually)
        console.print(f"[yellow]read by the toolkit's own LSM merge, as RocksDB could not serve them: {len(merged)} subtask(s)[/]", markup=True)
        for op, subtask, reason in merged:
            label = operator_label(op.label)
            console.print(f"  {label}[{subtask}]: {reason}", highlight=False)


def _runbook_command(path: str) -> str:
    """``repair runbook NAME``, the way to read a runbook wherever repair is installed (one pasteable line)."""
    from repair.ops.advice import runbook_command

    return runbook_command(path).to_shell()


#: Groups shown on a terminal when ``--top`` is not given.
SIZE_TOP = 15
_BAR_WIDTH = 24


def _size_label(key: dict) -> str:
    """A group's key as one cell: ``operator / state``, ``operator / subtask 3``, ``operator / key groups 0-63``, a file."""
    parts = [operator_label(key["operator"])] if key.get("operator") else []
    if "state" in key:
        parts.append(key["state"])
    if "subtask" in key:
        parts.append("(all subtasks)" if key["subtask"] is None else f"subtask {key['subtask']}")
    if "key_group_start" in key:
        start, end = key["key_group_start"], key["key_group_end"]
        parts.append("(no key groups)" if start is None else f"key groups {start}-{end}")
    if "file" in key:
        parts.append(key["file"] or "(inline in _metadata)")
    return " / ".join(parts)


def render_size(result) -> None:
    """The newest checkpoint's bytes per group with a bar each; a line for each older retained one."""
    console = stdout()
    document = result.to_json()
    checkpoints = document["checkpoints"]
    for older in checkpoints[:-1]:
        totals = older["totals"]
        console.print(f"{older['kind']} {older['checkpoint_id']}: {human_bytes(totals['bytes'])} in {totals['files']} files")
    newest = checkpoints[-1]
    totals = newest["totals"]
    console.print(
        f"[bold]{escape(newest['kind'])} {newest['checkpoint_id']}: {human_bytes(totals['bytes'])}[/] in {totals['files']} files "
        f"(shared {human_bytes(totals['shared_bytes'])}, private {human_bytes(totals['private_bytes'])}, "
        f"inline {human_bytes(totals['inline_bytes'])}; _metadata {human_bytes(totals['metadata_bytes'])}), "
        f"{totals['entries']:,} entries", markup=True,
    )
    groups = newest["groups"]
    shown = groups if result.top is not None else groups[:SIZE_TOP]
    largest = max((g["bytes"] for g in shown), default=0) or 1
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, padding=(0, 2, 0, 0))
    for column in (result.by, "bytes", "", "share", "files", "entries"):
        table.add_column(column, justify="left" if column in (result.by, "") else "right", overflow="fold")
    for group in shown:
        bar = _bar(group["bytes"], largest)
        share = f"{100 * group['bytes'] / totals['bytes']:.1f}%" if totals["bytes"] else "-"
        note = f" ({group['unknown_files']} unknown)" if group["unknown_files"] else ""
        table.add_row(_size_label(group), human_bytes(group["bytes"]), bar, share, f"{group['files']}{note}",
                      f"{group['entries']:,}" if group["entries"] else "")
    console.print(table)
    left = len(groups) - len(shown) + newest["groups_left_off"]
    if left:
        console.print(f"... and {left} smaller group(s) (--top N, --json)")
    console.print(f"read {human_bytes(result.bytes_read)} to count them (SST footers and properties, _metadata)")
    if document["deep"] is not None:
        _render_deep(console, document["deep"], result.top or SIZE_TOP)
    if document["history"] is not None:
        _render_history(console, document["history"], result.top is not None)
    if document["html"] is not None:
        console.print(f"wrote the page {escape(document['html'])}", markup=True, soft_wrap=True)
    _print_file_findings(console, result.findings)


_SPARKS = "▁▂▃▄▅▆▇█"


def _sparkline(values: list[int]) -> str:
    """``values`` as one mark each, from the smallest (▁) to the largest (█)."""
    low, high = min(values), max(values)
    return "".join(_SPARKS[0 if high == low else round((v - low) * (len(_SPARKS) - 1) / (high - low))] for v in values)


def _render_history(console, history: dict, all_shown: bool) -> None:
    """``size --history``: the root's bytes over the retained checkpoints, then the states that grew most."""
    ids = history["checkpoint_ids"]
    console.print(f"[bold]growth over checkpoints {ids[0]}-{ids[-1]} ({len(ids)} retained): "
                  f"{escape(_signed_bytes(history['growth_bytes']))}[/]  {_sparkline(history['bytes'])}", markup=True)
    states = history["states"]
    shown = states if all_shown else states[:SIZE_TOP]
    largest = max((abs(s["growth_bytes"]) for s in shown), default=0) or 1
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, padding=(0, 2, 0, 0))
    for column in ("state", "first", "last", "growth", "", "over time", "entries"):
        table.add_column(column, justify="left" if column in ("state", "", "over time") else "right", overflow="fold")
    for state in shown:
        growth = state["growth_bytes"]
        table.add_row(_size_label({"operator": state["operator"], "state": state["state"]}), human_bytes(state["bytes"][0]),
                      human_bytes(state["bytes"][-1]), _signed_bytes(growth), _bar(growth, largest, "█" if growth > 0 else "░"),
                      _sparkline(state["bytes"]), f"{state['growth_entries']:+,}" if state["growth_entries"] else "")
    console.print(table)
    left = len(states) - len(shown) + history["states_left_off"]
    if left:
        console.print(f"... and {left} state(s) that changed less (--top N, --json)")


def _render_deep(console, deep: dict, top: int) -> None:
    """``size --deep``: per state its live entries, what a compaction would reclaim, expired TTL rows, skew
    and largest key; then the value sizes of the largest state as a histogram."""
    console.print(f"[bold]keyed state of checkpoint {deep['checkpoint_id']}, read entry by entry[/]", markup=True)
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, padding=(0, 2, 0, 0))
    for column in ("state", "live", "live bytes", "reclaimable", "expired", "fullest key group", "largest key"):
        table.add_column(column, justify="left" if column in ("state", "largest key") else "right", overflow="fold")
    for state in deep["states"][:top]:
        ttl = state["ttl"]
        if ttl["expired_rows"] is not None:
            expired = f"{ttl['expired_rows']:,} of {ttl['rows']:,} ({human_bytes(ttl['expired_bytes'])})"
        else:
            expired = f"{ttl['rows']:,} with TTL (--ttl)" if ttl["rows"] else ""
        reclaimable = "" if state["reclaimable_entries"] is None else \
            f"{state['reclaimable_entries']:,} ({human_bytes(state['reclaimable_bytes'] or 0)})"
        skew = state["skew"]
        fullest = f"{skew['max_entries']:,} (mean {skew['mean_entries']:g})" if skew["key_groups"] else ""
        largest = state["largest_keys"][0] if state["largest_keys"] else None
        table.add_row(_size_label({"operator": state["operator"], "state": state["state"]}), f"{state['live_entries']:,}",
                      human_bytes(state["key_bytes"] + state["value_bytes"]), reclaimable, expired, fullest,
                      "" if largest is None else f"{escape(largest['key'] or '')} ({human_bytes(largest['bytes'])})")
    console.print(table)
    for skipped in deep["skipped"]:
        console.print(f"[yellow]not read[/]: {escape(operator_label(skipped['operator']))} subtask {skipped['subtask']}: "
                      f"{escape(skipped['reason'])}", markup=True, soft_wrap=True)
    largest_state = next((s for s in deep["states"] if s["value_sizes"]), None)
    if largest_state is not None:
        most = max(b["entries"] for b in largest_state["value_sizes"])
        console.print(f"value sizes of {escape(largest_state['state'])}:")
        for bucket in largest_state["value_sizes"]:
            console.print(f"  {bucket['from']:>8,}-{bucket['to']:<8,} {_bar(bucket['entries'], most)} {bucket['entries']:,}")


def _print_file_findings(console, findings) -> None:
    """size's and diff's findings (missing, damaged or unreadable files), one line each."""
    for finding in findings:
        style = "yellow" if finding.severity.value == "unknown" else "red"
        console.print(f"[{style}]{escape(finding.kind)}[/]: {escape(finding.message)}", markup=True, soft_wrap=True)


def _bar(n: int, largest: int, mark: str = "█") -> str:
    """``n``'s share of ``largest`` as a bar of at most :data:`_BAR_WIDTH` marks (one at least, none for 0)."""
    return mark * max(1, round(_BAR_WIDTH * abs(n) / largest)) if n else ""


def _signed_bytes(n: int) -> str:
    return ("+" if n > 0 else "-" if n < 0 else "") + human_bytes(abs(n))


def render_diff(result) -> None:
    """Two checkpoints' totals and files, then the states that changed most, with a bar each."""
    console = stdout()
    document = result.to_json()
    old, new, files = document["old"], document["new"], document["files"]
    console.print(f"[bold]{old['checkpoint_id']} -> {new['checkpoint_id']}: {human_bytes(old['bytes'])} -> "
                  f"{human_bytes(new['bytes'])} ({escape(_signed_bytes(document['growth_bytes']))})[/]", markup=True)
    console.print("  files: " + ", ".join(f"{name} {files[name]['files']} ({human_bytes(files[name]['bytes'])})"
                                          for name in ("added", "removed", "shared")))
    states = document["states"]
    shown = states if result.top is not None else states[:SIZE_TOP]
    largest = max((abs(s["growth_bytes"]) for s in shown), default=0) or 1
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, padding=(0, 2, 0, 0))
    for column in ("state", "old", "new", "growth", "", "entries", "new files"):
        table.add_column(column, justify="left" if column in ("state", "") else "right", overflow="fold")
    for state in shown:
        growth = state["growth_bytes"]
        bar = _bar(growth, largest, "█" if growth > 0 else "░")
        entries = state["growth_entries"]
        table.add_row(_size_label({"operator": state["operator"], "state": state["state"]}), human_bytes(state["old_bytes"]),
                      human_bytes(state["new_bytes"]), _signed_bytes(growth), bar, f"{entries:+,}" if entries else "",
                      str(state["added_files"]) if state["added_files"] else "")
    console.print(table)
    left = len(states) - len(shown) + document["states_left_off"]
    if left:
        console.print(f"... and {left} state(s) that changed less (--top N, --json)")
    _print_file_findings(console, result.findings)


def render_watch(result) -> None:
    """One line per checkpoint judged in the pass (its problems under a bad one), then the last good one."""
    console = stdout()
    document = result.to_json()
    if not document["checkpoints"]:
        console.print("no new checkpoint completed since the last pass")
    styles = {"good": "green", "bad": "bold red", "unknown": "yellow"}
    for checkpoint in document["checkpoints"]:
        problems = ", ".join(f"{kind} x{count}" for kind, count in checkpoint["problems"].items())
        style = styles.get(checkpoint["verdict"], "dim")
        console.print(Text.assemble((f"{checkpoint['name']}: {checkpoint['verdict']}", style), f"  {problems}" if problems else ""))
    for finding in result.findings:
        console.print(f"  [red]{escape(finding.kind)}[/]: {escape(finding.describe(result.source))}", markup=True, soft_wrap=True)
    read = document["read"]
    console.print(f"read {read['files']} files ({human_bytes(read['bytes'])}); {read['files_reused']} SSTs verified before, not read again")
    last_good = document["last_good"]
    console.print(f"last good: {last_good['name']} (completed {last_good['completed_at']})" if last_good else "last good: none yet")


def render_upgrade(result) -> None:
    """Per state what a restore in the release does today and what upgrade did (or would do); the
    refusals; the savepoint written and how to restore it."""
    console = stdout()
    when = "today" if result.check else "without upgrade"
    console.print(f"[bold]{escape(result.metadata)}[/] (_metadata version {result.source_metadata_version}) restored in "
                  f"Flink {escape(result.to)} {when}:", markup=True)
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, padding=(0, 2, 0, 0))
    for column in ("operator", "state", "kind", "restores", "upgrade", "rows"):
        table.add_column(column, overflow="fold")
    styles = {"same values": "green", "different values": "red", "fails": "red", "unknown": "yellow"}
    why: dict[str, list[str]] = {}
    for state in result.states:
        rows = f"{state.rows_differing} of {state.rows} differ" if state.rows_differing else str(state.rows)
        table.add_row(state.operator, state.state, state.kind, Text(state.outcome, style=styles[state.outcome]),
                      state.action, rows)
        if state.outcome != "same values" and state.action != "refused":
            why.setdefault(state.reason, []).append(state.state)
    console.print(table)
    for reason, states in why.items():
        console.print(f"  {', '.join(states)}: {reason}", highlight=False, markup=False, soft_wrap=True)
    if result.refused and not result.check:
        console.print(f"[bold red]refused {len(result.refused)} state(s): nothing written[/]", markup=True)
        for state in result.refused:
            console.print(f"  {state.operator}/{state.state}: {state.reason}", highlight=False, markup=False, soft_wrap=True)
    if result.written is not None:
        console.print(f"[bold green]wrote {escape(result.written.metadata)}[/] (canonical savepoint for Flink {escape(result.to)}, "
                      f"_metadata version {result.metadata_version})", markup=True)
        _restore_lines(console, parent(result.written.metadata), result.metadata_version)


_COMPAT_STYLES = {"compatible": "green", "compatible-reconfigured": "green", "compatible-after-migration": "yellow",
                  "state-lost": "red", "unknown": "yellow", "incompatible": "red"}


def render_compat(result) -> None:
    """The verdict first, then one row per operator and state with what Flink does, then each remedy."""
    console = stdout()
    if result.ok:
        console.print("[bold green]the new job restores OLD with its state[/]", markup=True)
    elif result.unknown:
        console.print("[bold yellow]no verdict for some states: see below[/]", markup=True)
    else:
        console.print("[bold red]the new job does not restore OLD with its state[/]", markup=True)
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, padding=(0, 2, 0, 0))
    for column in ("operator", "state", "verdict", "why"):
        table.add_column(column, overflow="fold")
    for entry in result.entries:
        style = _COMPAT_STYLES.get(entry.verdict, "")
        table.add_row(Text(entry.operator), Text(entry.state or "(operator)"), Text(entry.verdict, style=style), Text(entry.reason))
    console.print(table)
    for entry in result.entries:
        if entry.remedy is not None or entry.remedy_text:
            where = entry.operator + (f"/{entry.state}" if entry.state else "")
            console.print(f"{where}:", highlight=False, markup=False)
            if entry.remedy is not None:
                _command(console, "  ", entry.remedy)
            else:
                console.print(f"  {entry.remedy_text}", highlight=False, markup=False, soft_wrap=True)
