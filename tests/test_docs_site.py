"""The documentation site (mkdocs.yml, docs/, scripts/mkdocs_hooks.py; ``make docs``): it builds in strict mode, a
page per document, loading nothing from the network; a broken link, a broken anchor or a page left out of the nav
fails the build by name; and the README stays a five-minute read."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: documents outside docs/ that the hook publishes, by their page in the site
PUBLISHED = {"benchmarks.html": "benchmarks/README.md", "benchmarks-history.html": "benchmarks/HISTORY.md",
             "results-records.html": "results/README.md"}
#: what a page would fetch from the network: a script, a stylesheet (or any <link>), an image, a frame, a CSS import
REMOTE = re.compile(r"""<(?:script|img|iframe)\b[^>]*\bsrc=["']?(?:https?:)?//"""
                    r"""|<link\b[^>]*\bhref=["']?(?:https?:)?//|@import\s+(?:url\()?["']?(?:https?:)?//""", re.I)


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], capture_output=True, text=True, timeout=120, cwd=config.parent)


def test_the_site_builds_strictly_a_page_per_document_and_offline(tmp_path: Path) -> None:
    site = tmp_path / "site"
    done = build(ROOT / "mkdocs.yml", site)
    assert done.returncode == 0, done.stderr
    pages = {p.name for p in site.glob("*.html")}
    wanted = {"index.html", *(p.with_suffix(".html").name for p in (ROOT / "docs").glob("*.md")), *PUBLISHED}
    assert wanted <= pages
    remote = {f"{p.relative_to(site)}: {m.group(0)}" for p in site.rglob("*") if p.suffix in (".html", ".css")
              for m in REMOTE.finditer(p.read_text(errors="replace"))}
    assert remote == set()
    # browsable from file://: links name the page's file, never a directory
    assert 'href="cli.html"' in (site / "index.html").read_text()


def test_a_broken_link_an_unknown_anchor_or_a_page_left_out_fail_the_build_by_name(tmp_path: Path) -> None:
    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "docs", copy / "docs")
    for path in ("mkdocs.yml", "scripts/mkdocs_hooks.py", *PUBLISHED.values()):
        (copy / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, copy / path)
    with (copy / "docs" / "cli.md").open("a") as f:
        f.write("\nSee [the missing page](no-such-page.md) and [a missing section](lab.md#no-such-section).\n")
    (copy / "docs" / "orphan.md").write_text("# Not in the nav\n")
    done = build(copy / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0
    assert "no-such-page.md" in done.stderr
    assert "no-such-section" in done.stderr
    assert "orphan.md" in done.stderr


def test_the_readme_is_short_and_its_links_lead_somewhere() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    targets = {t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", readme) if "://" not in t and t[0] != "#"}
    assert sorted(t for t in targets if not (ROOT / t).exists()) == []
