"""``repair size --html FILE``: one self-contained page of where a checkpoint's bytes are and what grew.

The page is one HTML file with inline SVG and CSS, no script, no font or image from anywhere: a
browser opens it from disk without a server or network. It shows

* the newest checkpoint's bytes per state as horizontal bars (largest first, the rest summed), each with
  its share;
* the growth over the retained checkpoints (``repair size --history``'s ``history``): the bytes of
  each checkpoint as stacked bars, the states that grew most in their own colours, the rest in grey;
* with ``--deep``, a table per state: live entries, what a compaction would reclaim, expired TTL rows.

Every name read from the checkpoint (operator, state) is escaped: the page shows it, never runs it.
:func:`page` builds the text from the JSON documents (pure); :func:`repair.ops.size_history.size_history`
writes it through the storage layer, atomically.
"""

from __future__ import annotations

from html import escape

from repair.formats.flink.keygroups import operator_label

#: The bars' colour of the sizes chart (the browser test looks for it in a screenshot).
BAR_COLOUR = "#4a7ebb"
#: The growth chart's colours, one per state that grew most (pseudo-states such as ``(rocksdb files)``
#: excepted), then grey for the rest.
SERIES_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")
OTHER_COLOUR = "#b0b0b0"
#: States shown with a bar of their own, and in their own colour over time.
BARS = 20
_WIDTH = 900
_ROW = 22
_LABEL = 330


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _label(operator: str | None, state: str) -> str:
    return f"{operator_label(operator)} / {state}" if operator else state


def _sizes_chart(checkpoint: dict) -> str:
    groups = checkpoint["groups"]
    total = checkpoint["totals"]["bytes"] or 1
    shown = groups[:BARS]
    rest = sum(g["bytes"] for g in groups[BARS:])
    rows = [(_label(g["operator"], g["state"]), g["bytes"]) for g in shown] + ([("(the rest)", rest)] if rest else [])
    largest = max((b for _, b in rows), default=0) or 1
    span = _WIDTH - _LABEL - 140
    parts = [f'<svg id="sizes" xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{_ROW * len(rows) + 10}" '
             f'role="img" aria-label="bytes per state">']
    for i, (label, size) in enumerate(rows):
        y = 5 + i * _ROW
        width = max(1, round(span * size / largest)) if size else 0
        parts.append(
            f'<g><title>{escape(label)}: {size:,} bytes</title>'
            f'<text x="{_LABEL - 8}" y="{y + 15}" text-anchor="end">{escape(_short(label))}</text>'
            f'<rect class="bar" x="{_LABEL}" y="{y + 3}" width="{width}" height="{_ROW - 6}" fill="{BAR_COLOUR}"/>'
            f'<text x="{_LABEL + width + 6}" y="{y + 15}">{_human(size)} ({100 * size / total:.1f}%)</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def _short(label: str, limit: int = 44) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


def _growth_chart(document: dict) -> str:
    """Stacked bars per checkpoint: the states that grew most in their colours, the rest grey."""
    ids, totals = document["checkpoint_ids"], document["bytes"]
    growing = [s for s in document["states"] if s["growth_bytes"] > 0 and not s["state"].startswith("(")][: len(SERIES_COLOURS)]
    height, top, bottom, left = 320, 10, 40, 80
    span = max(totals) or 1
    step = (_WIDTH - left - 20) / max(len(ids), 1)
    bar = max(4.0, step * 0.7)
    parts = [f'<svg id="growth" xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{height}" role="img" '
             f'aria-label="bytes per retained checkpoint">',
             f'<text x="{left - 8}" y="{top + 10}" text-anchor="end">{_human(span)}</text>',
             f'<text x="{left - 8}" y="{height - bottom}" text-anchor="end">0</text>']
    scale = (height - top - bottom) / span
    for i, (checkpoint, total) in enumerate(zip(ids, totals)):
        x = left + i * step + (step - bar) / 2
        y = height - bottom
        layers = [(s, s["bytes"][i], colour) for s, colour in zip(growing, SERIES_COLOURS)]
        layers.append((None, total - sum(size for _, size, _ in layers), OTHER_COLOUR))
        for state, size, colour in layers:
            h = size * scale
            y -= h
            name = "the other states and pseudo-states" if state is None else _label(state["operator"], state["state"])
            parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{h:.1f}" fill="{colour}">'
                         f'<title>checkpoint {checkpoint}: {escape(name)} {size:,} bytes</title></rect>')
        parts.append(f'<text x="{x + bar / 2:.1f}" y="{height - bottom + 16}" text-anchor="middle">{checkpoint}</text>')
    parts.append("</svg>")
    legend = "".join(f'<li><span class="swatch" style="background:{colour}"></span>{escape(_label(s["operator"], s["state"]))} '
                     f'{_human(s["bytes"][0])} → {_human(s["bytes"][-1])} (+{_human(s["growth_bytes"])})</li>'
                     for s, colour in zip(growing, SERIES_COLOURS))
    legend += (f'<li><span class="swatch" style="background:{OTHER_COLOUR}"></span>the other states, RocksDB\'s own files, '
               'meta data and _metadata</li>')
    return "".join(parts) + f'<ul class="legend">{legend}</ul>'


def _deep_table(deep: dict) -> str:
    rows = []
    for s in deep["states"]:
        ttl = s["ttl"]
        expired = "" if ttl["expired_rows"] is None else f'{ttl["expired_rows"]:,} of {ttl["rows"]:,} ({_human(ttl["expired_bytes"])})'
        reclaim = "" if s["reclaimable_entries"] is None else f'{s["reclaimable_entries"]:,} ({_human(s["reclaimable_bytes"] or 0)})'
        rows.append(f'<tr><td>{escape(_label(s["operator"], s["state"]))}</td><td>{s["live_entries"]:,}</td>'
                    f'<td>{_human(s["key_bytes"] + s["value_bytes"])}</td><td>{reclaim}</td><td>{expired}</td></tr>')
    return ("<table><tr><th>state</th><th>live entries</th><th>live bytes</th><th>reclaimable</th><th>expired (TTL)</th></tr>"
            + "".join(rows) + "</table>")


_STYLE = """body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222}h1{font-size:20px}h2{font-size:16px;margin-top:28px}
svg text{font:12px system-ui,sans-serif;fill:#222}.legend{list-style:none;padding:0}.legend li{margin:2px 0}
.swatch{display:inline-block;width:12px;height:12px;margin-right:6px;vertical-align:middle}
table{border-collapse:collapse}td,th{padding:2px 10px;text-align:right}td:first-child,th:first-child{text-align:left}"""


def page(document: dict, history: dict) -> str:
    """The page of ``repair size``'s ``document`` (sizes of its newest checkpoint, its ``deep`` view if
    any) and of ``history`` (the ``history`` document of ``--history``)."""
    newest = document["checkpoints"][-1]
    title = f"Checkpoint size: {document['source']}"
    body = [f"<h1>{escape(title)}</h1>",
            f'<p>{escape(newest["kind"])} {newest["checkpoint_id"]}: {_human(newest["totals"]["bytes"])} in '
            f'{newest["totals"]["files"]:,} files; {len(history["checkpoint_ids"])} retained checkpoint(s).</p>',
            "<h2>Bytes per state (newest checkpoint)</h2>", _sizes_chart(newest)]
    if len(history["checkpoint_ids"]) > 1:
        growth = history["growth_bytes"]
        body += [f"<h2>Growth over the retained checkpoints ({'+' if growth >= 0 else '-'}{_human(abs(growth))})</h2>",
                 _growth_chart(history)]
    if document["deep"] is not None:
        body += [f'<h2>Keyed state of checkpoint {document["deep"]["checkpoint_id"]}, read entry by entry</h2>',
                 _deep_table(document["deep"])]
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f"<style>{_STYLE}</style></head><body>{''.join(body)}</body></html>\n")
