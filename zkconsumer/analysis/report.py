"""A one-page report in Markdown and HTML, built from one list of blocks so both always say the same.

No template engine or Markdown library (no new dependencies): blocks are headings, paragraphs, bullet
lists, small tables (pandas) and images, each rendered twice. Inline text knows two marks, both rendered in
each format: links (:meth:`Report.link`, :meth:`Report.see`) and ``**bold**``.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

PREVIEW_ROWS = 15


@dataclass
class Report:
    title: str
    blocks: list[tuple[str, Any]] = field(default_factory=list)

    def h2(self, text: str) -> None:
        self.blocks.append(("h2", text))

    def p(self, text: str) -> None:
        self.blocks.append(("p", text))

    def bullets(self, items: list[str]) -> None:
        self.blocks.append(("ul", items))

    def table(self, df: pd.DataFrame, caption: str = "") -> None:
        self.blocks.append(("table", (df, caption)))

    def image(self, path: str, alt: str) -> None:
        self.blocks.append(("img", (path, alt)))

    def link(self, text: str, href: str) -> str:
        """An inline link token; rendered per format (``[[text|href]]``)."""
        return f"[[{text}|{href}]]"

    def see(self, text: str, href: str) -> str:
        """A link that backs up the words before it (a count, a verdict), set apart in brackets with its own
        leading space: appended to "holds" it reads "holds (duplicates.csv)", never "holds[duplicates.csv]"."""
        return f" ({self.link(text, href)})"

    # ------------------------------------------------------------------ rendering
    def to_markdown(self) -> str:
        out = [f"# {self.title}", ""]
        for kind, value in self.blocks:
            if kind == "h2":
                out += [f"## {value}", ""]
            elif kind == "p":
                out += [_md_inline(value), ""]
            elif kind == "ul":
                out += [f"- {_md_inline(i)}" for i in value] + [""]
            elif kind == "table":
                df, caption = value
                if caption:
                    out += [_md_inline(caption), ""]
                out += [_md_table(df), ""]
            elif kind == "img":
                path, alt = value
                out += [f"![{alt}]({path})", ""]
        return "\n".join(out)

    def to_html(self) -> str:
        body = [f"<h1>{html.escape(self.title)}</h1>"]
        for kind, value in self.blocks:
            if kind == "h2":
                body.append(f"<h2>{html.escape(value)}</h2>")
            elif kind == "p":
                body.append(f"<p>{_html_inline(value)}</p>")
            elif kind == "ul":
                body.append("<ul>" + "".join(f"<li>{_html_inline(i)}</li>" for i in value) + "</ul>")
            elif kind == "table":
                df, caption = value
                cap = f"<caption>{_html_inline(caption)}</caption>" if caption else ""
                head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
                rows = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in r) + "</tr>"
                               for r in df.itertuples(index=False))
                body.append(f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
            elif kind == "img":
                path, alt = value
                body.append(f'<figure><img src="{html.escape(path)}" alt="{html.escape(alt)}">'
                            f"<figcaption>{html.escape(alt)}</figcaption></figure>")
        return (f"<!doctype html>\n<html><head><meta charset='utf-8'><title>{html.escape(self.title)}</title>"
                f"<style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")

    def write(self, out_dir: Path) -> tuple[Path, Path]:
        md, page = out_dir / "report.md", out_dir / "report.html"
        md.write_text(self.to_markdown(), encoding="utf-8")
        page.write_text(self.to_html(), encoding="utf-8")
        return md, page


_CSS = ("body{font-family:sans-serif;max-width:70em;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse;font-size:.85em;margin:.5em 0 1.5em}"
        "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}caption{text-align:left;font-weight:bold}"
        "img{max-width:100%}figure{margin:1em 0}")


def _cell(v: Any) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return ""
    if hasattr(v, "tolist"):
        v = v.tolist()
    if isinstance(v, list | tuple):
        return ", ".join(_cell(x) for x in v)
    return str(v)


def _split_links(text: str) -> list[tuple[str, str | None]]:
    """Text and ``[[label|href]]`` tokens, in order."""
    out: list[tuple[str, str | None]] = []
    rest = text
    while "[[" in rest and "]]" in rest:
        before, _, tail = rest.partition("[[")
        token, _, rest = tail.partition("]]")
        label, _, href = token.partition("|")
        out += [(before, None), (label, href)]
    out.append((rest, None))
    return out


def _md_inline(text: str) -> str:
    return "".join(f"[{t}]({h})" if h is not None else t for t, h in _split_links(text))


_BOLD = re.compile(r"\*\*(.+?)\*\*")


def _html_inline(text: str) -> str:
    """Markdown's inline marks in HTML: links as <a>, ``**bold**`` as <strong> (so "**broken**" is not shown as
    asterisks in report.html while report.md shows it bold)."""
    return "".join(f'<a href="{html.escape(h)}">{html.escape(t)}</a>' if h is not None
                   else _BOLD.sub(r"<strong>\1</strong>", html.escape(t))
                   for t, h in _split_links(text))


def _md_table(df: pd.DataFrame) -> str:
    if df.empty:
        return "_(no rows)_"
    head = "| " + " | ".join(str(c) for c in df.columns) + " |"
    sep = "|" + "|".join("---" for _ in df.columns) + "|"
    rows = ["| " + " | ".join(_cell(v).replace("|", "\\|") for v in r) + " |"
            for r in df.itertuples(index=False)]
    return "\n".join([head, sep, *rows])
