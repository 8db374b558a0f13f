"""Make the pictures of the pages (docs/img/page_*.png, in docs/pages.md) from real runs, in headless Chromium.

    .venv/bin/python scripts/screenshots.py [--out lab-runs/screenshots] [--skip-compare]

1. ``zkconsumer lab --ui --analyze`` with three members, and ``zkconsumer watch`` on the lab's ZooKeeper group; a
   click on "kill -9" for c1 in the lab page; both pages photographed once the group has settled again; "finish";
2. the report.html the lab's ``--analyze`` wrote, with the ownership timeline hovered;
3. ``zkconsumer compare`` (its default variants) and its compare.html.

Not a test (tests/test_lab_ui.py, tests/test_watch.py and the analysis tests check the same pages); it takes about
four minutes. Uses the system chromium through Playwright, as the tests do (tests/browser.py).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from browser import chromium, open_page  # noqa: E402 - tests/ is put on the path first

IMG = ROOT / "docs" / "img"
WIDTH = 1280


def zkconsumer(*args: str, log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "zkconsumer", *args], stdout=log.open("w"),
                            stderr=subprocess.STDOUT, cwd=ROOT)


def wait_for(log: Path, pattern: str, proc: subprocess.Popen, timeout: float = 120) -> re.Match:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(pattern, log.read_text(errors="replace"))
        if found:
            return found
        if proc.poll() is not None:
            sys.exit(f"{proc.args} exited {proc.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)
    sys.exit(f"no {pattern!r} in {log} after {timeout} s")


def shoot(page, name: str, height: int | None = None) -> None:
    path = IMG / name
    if height is None:
        page.screenshot(path=path, full_page=True)
    else:
        page.screenshot(path=path, clip={"x": 0, "y": 0, "width": WIDTH, "height": height})
    print(f"wrote {path.relative_to(ROOT)}")


def live_pages(browser, out: Path) -> Path:
    """lab --ui and watch, a kill -9 clicked; returns the lab's report directory."""
    out.mkdir(parents=True, exist_ok=True)
    lab_log = out / "lab.log"
    lab = zkconsumer("lab", "--ui", "--consumers", "3", "--analyze", "--out", str(out / "lab"), log=lab_log)
    url = wait_for(lab_log, r"live page: (http://\S+)", lab).group(1)
    zk = wait_for(lab_log, r"ZooKeeper (\S+), broker", lab).group(1)
    watch_log = out / "watch.log"
    watch = zkconsumer("watch", "--zookeeper", zk, "--group", "lab", log=watch_log)
    watch_url = wait_for(watch_log, r"zkconsumer watch: (http://\S+)", watch).group(1)
    try:
        with open_page(browser, url, WIDTH, 1000) as (page, _), open_page(browser, watch_url, WIDTH, 1000) as (
                wpage, _):
            page.wait_for_function("document.querySelectorAll('#partitions tr[data-owner]').length >= 12")
            time.sleep(3)  # a few seconds of ownership on the timeline before the kill
            page.locator("button.act[data-action=kill][data-member=c1]").click()
            page.wait_for_selector("#events li[data-kind=rebalance]:has-text('settled')", timeout=30_000)
            wpage.wait_for_selector("#events li:has-text('settled')", timeout=30_000)
            time.sleep(2)
            shoot(page, "page_lab_ui.png")
            shoot(wpage, "page_watch.png")
            page.locator("#actions button.act[data-action=finish]").click()
        lab.wait(300)
    finally:
        watch.terminate()
        lab.terminate()
    return out / "lab" / "report"


def report_page(browser, report: Path) -> None:
    """The report's timeline (the first figure), an ownership bar hovered."""
    with open_page(browser, (report / "report.html").as_uri(), WIDTH, 1100) as (page, log):
        figure = page.locator(".js-plotly-plot").first
        figure.scroll_into_view_if_needed()
        bars = figure.locator(".point path")
        box = max((bars.nth(i).bounding_box() for i in range(min(bars.count(), 60))),
                  key=lambda b: b["width"] if b and b["y"] > 200 else 0)  # a long stint, below the hover's room
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.wait_for_selector(".hovertext")
        figure.screenshot(path=IMG / "page_report.png")
        print(f"wrote {(IMG / 'page_report.png').relative_to(ROOT)}")
        if log.errors or log.remote:
            sys.exit(f"report.html: {log.errors} {log.remote}")


def compare_page(browser, out: Path) -> None:
    log = out / "compare.log"
    proc = zkconsumer("compare", "--duration", "30", "--out", str(out / "compare"), log=log)
    if proc.wait(900) not in (0, 1):  # 1: a variant's verify failed; the page is still worth a look
        sys.exit(log.read_text(errors="replace")[-3000:])
    with open_page(browser, (out / "compare" / "compare.html").as_uri(), WIDTH, 1100) as (page, _):
        page.wait_for_selector(".js-plotly-plot")
        shoot(page, "page_compare.png", height=1100)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=ROOT / "lab-runs" / time.strftime("screenshots-%Y%m%d-%H%M%S"))
    p.add_argument("--skip-compare", action="store_true")
    p.add_argument("--report", type=Path, help="photograph this report directory instead of running a lab first")
    args = p.parse_args()
    with chromium() as browser:
        report = args.report or live_pages(browser, args.out)
        report_page(browser, report)
        if not args.skip_compare:
            compare_page(browser, args.out)


if __name__ == "__main__":
    main()
