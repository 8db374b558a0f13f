"""MkDocs hooks of the documentation site (mkdocs.yml ``hooks:``; ``make docs``).

- The documents that live outside docs/ but that docs/ links to become pages of the site: benchmarks/README.md
  (``benchmarks.md``), benchmarks/HISTORY.md (``benchmarks-history.md``, which the former links to) and
  results/README.md (``results-records.md``); and ``results-over-time.html``, the headline figures across the recorded
  runs (``zkconsumer results page``). Links to them, and their own relative links, are rewritten to where
  they land, so ``mkdocs build --strict`` checks them like any other page.
- Headings get GitHub's anchors (the documents are read on GitHub too, and their links use its anchors): lower
  case, punctuation dropped, every space a hyphen, without collapsing runs of hyphens as Python-Markdown does.
- Every page's result blocks (``<!-- result ... -->``, docs/results.md) are rendered from their records at build
  time, so a reader of the site sees the mark of a figure measured before its code last changed.
"""

from __future__ import annotations

import re
import unicodedata
import warnings
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent

#: documents outside docs/ published as pages: the page's path in the site -> the file in the repository
EXTERNAL = {
    "benchmarks.md": "benchmarks/README.md",
    "benchmarks-history.md": "benchmarks/HISTORY.md",
    "results-records.md": "results/README.md",
}

#: a Markdown link's or image's target: ``](target)`` or ``](target "title")``
LINK = re.compile(r"(\]\()(?P<target>[^)\s]+)")


def _page_of(target: str, source: str) -> str | None:
    """The site path a link ``target`` written in the repository file ``source`` points to, when the link leads
    out of docs/ (to a published document) or is written from a published document; else None (left as it is)."""
    if "://" in target or target.startswith(("#", "mailto:")):
        return None
    path, sep, anchor = target.partition("#")
    resolved = (ROOT / source).parent.joinpath(path).resolve()
    try:
        rel = resolved.relative_to(ROOT).as_posix()
    except ValueError:
        return None
    by_repo_path = {repo: page for page, repo in EXTERNAL.items()}
    if rel in by_repo_path:
        page = by_repo_path[rel]
    elif rel.startswith("docs/"):
        page = rel.removeprefix("docs/")
    else:
        return None
    return page + sep + anchor


def rewrite_links(markdown: str, source: str) -> str:
    """``markdown``, from the repository file ``source``, with its links to published documents (and, in a
    published document, its links into docs/) pointing at their pages of the site (which is flat: docs/'s root)."""
    def one(m: re.Match[str]) -> str:
        page = _page_of(m["target"], source)
        return m.group(0) if page is None else m.group(1) + page

    return LINK.sub(one, markdown)


def github_slugify(value: str, separator: str = "-") -> str:
    """A heading's anchor as GitHub makes it (Python-Markdown's toc ``slugify`` signature)."""
    value = unicodedata.normalize("NFKD", value)
    value = re.sub(r"[^\w\- ]", "", value, flags=re.UNICODE).strip().lower()
    return value.replace(" ", separator)


def on_config(config):
    toc = config.mdx_configs.setdefault("toc", {})
    toc["slugify"] = github_slugify
    return config


def on_files(files: Files, config) -> Files:
    for page, repo_path in EXTERNAL.items():
        files.append(File.generated(config, page, abs_src_path=str(ROOT / repo_path)))
    # the results page (zkconsumer results page): the headline figures across the recorded runs, one offline file
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from zkconsumer.results import page, record

    files.append(File.generated(config, "results-over-time.html", content=page.page(record.load_all())))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    with warnings.catch_warnings():  # kafka-python, imported on the way, loads its schemas with a deprecated API
        warnings.simplefilter("ignore", DeprecationWarning)
        from zkconsumer.results.blocks import render_text

    src = page.file.src_uri
    source = EXTERNAL.get(src, f"docs/{src}")
    return render_text(rewrite_links(markdown, source))
