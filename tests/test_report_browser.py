"""The report in a real browser: headless Chromium (the distribution's package, driven through its own
`--dump-dom` and `--screenshot` modes) loads it offline with no console errors, draws one tree element
per node, and paints a page that is not blank. Skipped, saying why, where no Chromium is installed
(`bash scripts/setup.sh` installs one with apt-get where it runs as root on Debian)."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from arts.search.cli.main import main
from arts.search.store import Store

BROWSER = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
pytestmark = pytest.mark.skipif(
    BROWSER is None, reason="no headless Chromium on PATH (apt-get install chromium, or scripts/setup.sh)"
)


def chromium(page: Path, tmp: Path, *mode: str) -> subprocess.CompletedProcess:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", f"--user-data-dir={tmp / 'profile'}",
             "--enable-logging=stderr", "--v=0", "--host-resolver-rules=MAP * ~NOTFOUND"]  # fmt: skip
    return subprocess.run(
        [BROWSER, *flags, *mode, page.as_uri()], capture_output=True, text=True, timeout=90, cwd=tmp
    )


def png_pixels(path: Path, max_rows: int) -> tuple[int, int, list[bytes]]:
    """(width, height, the first max_rows rows of RGB(A) bytes) of an 8-bit PNG, its filters undone
    (in plain Python: no imaging library is needed, and the top of the page is what matters)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6)
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytes(width * bpp)
    for y in range(min(height, max_rows)):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a, b = line[i - bpp] if i >= bpp else 0, prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            p = a + b - c
            pred = (
                a
                if abs(p - a) <= abs(p - b) and abs(p - a) <= abs(p - c)
                else b
                if abs(p - b) <= abs(p - c)
                else c
            )
            line[i] = (line[i] + (0, a, b, (a + b) // 2, pred)[f]) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, rows


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("browser") / "run"
    argv = ["search", "circle-packing-26", "--method", "mutate", "--evals", "5", "--group", "2",
            "--run-dir", str(run), "-q"]  # fmt: skip
    assert main(argv) == 0
    return run


def test_report_loads_offline_without_console_errors_and_draws_every_node(finished, tmp_path):
    page = finished / "report.html"
    html = page.read_text()
    assert not re.search(r"(src|href)=[\"']?(https?:)?//", html), "the report must not load anything"
    dom = chromium(page, tmp_path, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    errors = [ln for ln in dom.stderr.splitlines() if "CONSOLE" in ln or "Uncaught" in ln]
    assert not errors, errors
    nodes = len(Store.open_readonly(finished).load_state().nodes)
    assert len(re.findall(r'<g class="node"', dom.stdout)) == nodes >= 3
    assert dom.stdout.count('class="chart"') >= 2 and "evaluations" in dom.stdout


def test_report_screenshot_is_not_blank(finished, tmp_path):
    shot = tmp_path / "report.png"
    run = chromium(finished / "report.html", tmp_path, f"--screenshot={shot}", "--window-size=1000,1200")
    assert run.returncode == 0 and shot.is_file(), run.stderr[-2000:]
    assert shot.stat().st_size > 30_000, "a blank page compresses to a few KB"
    width, height, rows = png_pixels(shot, max_rows=500)  # the header, the charts and the tree's top
    assert (width, height) == (1000, 1200)
    bpp = len(rows[0]) // width
    ink = sum(1 for row in rows[::4] for x in range(0, width * bpp, bpp * 4) if min(row[x : x + 3]) < 200)
    assert ink > 500, f"only {ink} sampled pixels are not near-white: the page looks blank"
    colours = {row[x : x + 3] for row in rows[::8] for x in range(0, width * bpp, bpp * 8)}
    assert len(colours) > 10, "too few colours for the charts of a coloured report"
