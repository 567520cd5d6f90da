"""The report in a real browser: headless Chromium (the distribution's package, driven through its own
`--dump-dom` and `--screenshot` modes, and through the DevTools protocol over `--remote-debugging-pipe`,
which needs no client library) loads it offline with no console errors, draws one labelled tree element
per node, paints a page that is not blank, opens a node's panel beside the tree on a real mouse click, and
colours a worse-than-seed node of a minimise task as worse. Skipped, saying why, where no Chromium is installed
(`bash scripts/setup.sh` installs one with apt-get where it runs as root on Debian)."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import time
import zlib
from pathlib import Path

import pytest

from arts.search.cli.main import main
from arts.search.report.html import render_report
from arts.search.report.labels import move_label
from arts.search.store import Store
from tests.doubles import minimise_state

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
    assert len(re.findall(r'<g class="node[ "]', dom.stdout)) == nodes >= 3
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


class Page:
    """One page in headless Chromium, driven over the DevTools protocol on a pipe (fd 3 in, fd 4 out;
    messages are JSON ended by a NUL byte)."""

    def __init__(self, url: str, tmp: Path, size: tuple[int, int] = (1500, 1000)):
        taken = [os.open(os.devnull, os.O_RDONLY) for _ in range(5)]  # keep our pipes off fds 3 and 4
        ours_in, theirs_out = os.pipe()
        theirs_in, ours_out = os.pipe()

        def onto_3_and_4() -> None:
            os.dup2(theirs_in, 3)
            os.dup2(theirs_out, 4)

        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--remote-debugging-pipe",
                 f"--window-size={size[0]},{size[1]}", f"--user-data-dir={tmp / 'cdp-profile'}",
                 "--host-resolver-rules=MAP * ~NOTFOUND"]  # fmt: skip
        self.proc = subprocess.Popen(
            [BROWSER, *flags], pass_fds=(3, 4, theirs_in, theirs_out), preexec_fn=onto_3_and_4,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        for fd in (*taken, theirs_in, theirs_out):
            os.close(fd)
        self.rd, self.wr, self.buf, self.n, self.session = ours_in, ours_out, b"", 0, None
        target = self.call("Target.createTarget", url=url)["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        deadline = time.time() + 30
        loaded = (
            "document.readyState == 'complete' && location.protocol == 'file:'"  # not the first about:blank
        )
        while not self.eval(loaded) and time.time() < deadline:
            time.sleep(0.1)

    def call(self, method: str, **params) -> dict:
        self.n += 1
        msg = {"id": self.n, "method": method, "params": params}
        if self.session:
            msg["sessionId"] = self.session
        os.write(self.wr, json.dumps(msg).encode() + b"\0")
        while True:
            while b"\0" not in self.buf:
                chunk = os.read(self.rd, 1 << 16)
                assert chunk, "Chromium closed the DevTools pipe"
                self.buf += chunk
            raw, self.buf = self.buf.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self.n:
                assert "error" not in reply, reply
                return reply["result"]

    def eval(self, expression: str):
        got = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        assert "exceptionDetails" not in got, got
        return got["result"].get("value")

    def click(self, x: float, y: float) -> None:
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def close(self) -> None:
        try:
            self.session = None
            self.call("Browser.close")
            self.proc.wait(10)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            os.close(self.rd)
            os.close(self.wr)


def test_every_tree_node_shows_its_id_score_and_move(finished, tmp_path):
    state = Store.open_readonly(finished).load_state()
    page = Page((finished / "report.html").as_uri(), tmp_path)
    try:
        shown = page.eval("[...document.querySelectorAll('svg.tree g.node')].map(g => [g.dataset.node, "
                          "g.querySelector('text').textContent, g.querySelector('text').getBBox().width])")  # fmt: skip
    finally:
        page.close()
    assert len(shown) == len(state.nodes)
    for nid, text, width in shown:
        n = state.nodes[int(nid)]
        assert text.startswith(f"{nid} ") and move_label(n.hypothesis) in text, text
        assert n.raw_score is None or f"{n.raw_score:.4g}" in text, text
        assert width > 40, f"node {nid}'s label is not painted"


def test_clicking_a_node_opens_its_panel_beside_the_tree(finished, tmp_path):
    state = Store.open_readonly(finished).load_state()
    best = state.best()
    node = next(
        n for n in sorted(state.nodes.values(), key=lambda n: -n.id) if n.parent is not None and n is not best
    )
    page = Page((finished / "report.html").as_uri(), tmp_path)
    try:
        shown = (
            "[...document.querySelectorAll('.node-panel')].filter(p => getComputedStyle(p).display != 'none')"
        )
        assert page.eval(f"{shown}.map(p => p.id)") == [f"node-{best.id}"]  # the best node's, to start with
        dot = f"document.querySelector('g.node[data-node=\"{node.id}\"] .dot')"
        page.eval(f"{dot}.scrollIntoView({{block: 'center'}})")
        before = page.eval("window.scrollY")
        x, y = page.eval(f"(r => [r.x + r.width / 2, r.y + r.height / 2])({dot}.getBoundingClientRect())")
        page.click(x, y)
        opened = page.eval(f"{shown}.map(p => [p.id, p.innerText, p.getBoundingClientRect().top])")
        after = page.eval("window.scrollY")
        tree_top = page.eval("document.querySelector('.tree-wrap').getBoundingClientRect().top")
        height = page.eval("innerHeight")
    finally:
        page.close()
    assert len(opened) == 1 and opened[0][0] == f"node-{node.id}", opened
    _, text, top = opened[0]
    assert f"node {node.id} ← {node.parent}" in text and node.hypothesis[:40] in text.replace("\n", " ")
    assert "Diff against the parent" in text and ("+++ b/" in text or "No change" in text)
    assert after == before, "a click on the tree must not move the page"
    assert abs(top - tree_top) < 60 and 0 <= top < height, "the panel opens beside the tree, in view"


def test_a_worse_than_seed_node_is_not_painted_as_better(tmp_path):
    path = tmp_path / "report.html"
    path.write_text(render_report(minimise_state(), None, "minimise"))
    page = Page(path.as_uri(), tmp_path)
    try:
        fill = "(n => getComputedStyle(document.querySelector(`g.node[data-node='${n}'] .dot`)).fill)"
        worse, better = page.eval(f"{fill}(2)"), page.eval(f"{fill}(3)")
        badge = page.eval("document.querySelector('#node-2 .verdict').innerText")
    finally:
        page.close()
    (r, g, _), (r2, g2, _) = (tuple(map(int, re.findall(r"\d+", c)[:3])) for c in (worse, better))
    assert r > g, f"4.96 against a 2.65 seed, minimised, is painted {worse}"
    assert g2 > r2, f"2.61 against a 2.65 seed, minimised, is painted {better}"
    assert badge == "worse than the seed"
