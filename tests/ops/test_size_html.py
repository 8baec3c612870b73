"""``repair size --html FILE``: one self-contained page, opened by a real browser (headless Chromium,
Debian's package) from disk, with no server and no network.

The screenshot must show the bars of the sizes chart (pixels of their colour) and the growth chart
(pixels of the colour of the state that grew most); the page's title must be there once the browser
has loaded it, and the browser must log no console error. Chromium runs twice (the DOM, the
screenshot), a few seconds in all.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from repair.cli.app import main
from repair.ops.size_history import size_history
from repair.ops.size_html import BAR_COLOUR, SERIES_COLOURS
from tests import damage
from tests.conftest import FIXTURES, GROWTH_FIXTURE_NAMES, MISSING_TOOL
from tests.png_pixels import colours

ROOT = damage.checkpoint_root(FIXTURES / GROWTH_FIXTURE_NAMES[-1])


def _rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


def _chromium(page, tmp_path, *args: str) -> subprocess.CompletedProcess:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip(f"{MISSING_TOOL} chromium (Debian's package) not on PATH")
    return subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
         "--enable-logging=stderr", "--v=0", f"--user-data-dir={tmp_path / 'profile'}", *args, page.as_uri()],
        capture_output=True, text=True, timeout=120, check=True)


def test_the_page_renders_in_a_browser(tmp_path, read_only_guard):
    page = tmp_path / "size.html"
    result = size_history(str(read_only_guard(ROOT)), html=str(page), show_history=False, deep=True, ttl=["recent=1s"])
    assert result.html == str(page) and result.history is None
    text = page.read_text()
    assert "<script" not in text and not re.search(r"""(src|href)=["']?(https?:)?//""", text)  # nothing to fetch

    dom = _chromium(page, tmp_path, "--dump-dom")
    assert f"<title>Checkpoint size: {ROOT}</title>" in dom.stdout
    assert not [line for line in dom.stderr.splitlines() if "CONSOLE" in line], dom.stderr

    shot = tmp_path / "shot.png"
    _chromium(page, tmp_path, f"--screenshot={shot}", "--window-size=1000,1400")
    pixels = colours(shot.read_bytes())
    assert pixels[_rgb(BAR_COLOUR)] > 2000  # the sizes chart's bars
    grew_most = next(s for s in size_history(str(ROOT)).to_json()["history"]["states"] if not s["state"].startswith("("))
    assert grew_most["state"] == "leak"
    assert pixels[_rgb(SERIES_COLOURS[0])] > 2000  # its layer of the growth chart's bars


def test_the_page_is_a_new_file_outside_the_input(tmp_path, capsys):
    assert main(["size", str(ROOT), "--html", str(ROOT / "size.html")]) == 2
    assert not (ROOT / "size.html").exists()
    taken = tmp_path / "taken.html"
    taken.write_text("mine")
    capsys.readouterr()
    assert main(["size", str(ROOT), "--html", str(taken)]) == 2
    assert taken.read_text() == "mine"
    assert "output file already exists" in capsys.readouterr().err
    # an empty directory takes a new directory output, never a page written over it
    (tmp_path / "empty").mkdir()
    assert main(["size", str(ROOT), "--html", str(tmp_path / "empty")]) == 2
    assert "output file already exists" in capsys.readouterr().err and not list((tmp_path / "empty").iterdir())
    assert main(["size", str(ROOT), "--html", str(tmp_path / "page.html"), "-c", "3"]) == 2


def test_names_from_the_checkpoint_are_escaped():
    from repair.ops.size_html import page

    document = {"source": "<root>", "deep": None, "checkpoints": [{
        "kind": "checkpoint", "checkpoint_id": 1, "totals": {"bytes": 10, "files": 1},
        "groups": [{"operator": None, "state": "<script>alert(1)</script>", "bytes": 10}]}]}
    text = page(document, {"checkpoint_ids": [1], "bytes": [10], "growth_bytes": 0, "states": [], "steps": []})
    assert "<script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
