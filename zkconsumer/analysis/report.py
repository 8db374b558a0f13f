"""A one-page report in Markdown and HTML, built from one list of blocks so both always say the same.

No template engine or Markdown library (no new dependencies): blocks are headings, paragraphs, bullet
lists, small tables (pandas), images and interactive figures, each rendered twice. Inline text knows two marks,
both rendered in each format: links (:meth:`Report.link`, :meth:`Report.see`) and ``**bold**``.

report.html stands alone, so it can be mailed or opened offline: images are embedded as data: URIs, plotly.js
is embedded once (with the first figure), tables sort on a click of their header (a few lines of inline script).
Markdown shows a figure as the PNG that stands for it.
"""

from __future__ import annotations

import base64
import html
import mimetypes
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pandas as pd


class Figure(Protocol):
    """What the report needs of a figure (a plotly ``Figure``): its HTML, with or without plotly.js."""

    def to_html(self, *, full_html: bool, include_plotlyjs: bool, div_id: str | None, config: dict) -> str: ...


PREVIEW_ROWS = 15


@dataclass
class Written:
    """What a pipeline wrote under ``out_dir``: its tables (name → rows), plots and report.md / report.html, and
    how long it took. The trace analysis and the sweep both extend it, so the CLI tells of either the same way."""

    out_dir: Path
    tables: dict[str, int] = field(default_factory=dict)
    plots: list[Path] = field(default_factory=list)
    report_md: Path | None = None
    report_html: Path | None = None
    seconds: float = 0.0


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

    def figure(self, fig: Figure, png: str | None, alt: str, caption: str = "") -> None:
        """An interactive figure in HTML (with ``caption`` under it); in Markdown the PNG ``png`` that stands
        for it, or nothing."""
        self.blocks.append(("figure", (fig, png, alt, caption)))

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
            elif kind == "figure":
                _, png, alt, _ = value
                out += [f"![{alt}]({png})", ""] if png else []
        return "\n".join(out)

    def to_html(self, base: Path | None = None) -> str:
        """The page; ``base`` (the report's directory) embeds the images found under it as data: URIs."""
        body = [f"<h1>{html.escape(self.title)}</h1>"]
        figures = 0
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
                body.append(f"<table class='sortable'>{cap}<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
            elif kind == "img":
                path, alt = value
                body.append(f'<figure><img src="{html.escape(_embedded(path, base))}" alt="{html.escape(alt)}">'
                            f"<figcaption>{html.escape(alt)}</figcaption></figure>")
            elif kind == "figure":
                fig, _, alt, caption = value
                figures += 1
                div = fig.to_html(full_html=False, include_plotlyjs=figures == 1, div_id=f"figure-{figures}",
                                  config={"displaylogo": False, "responsive": True})
                body.append(f"<figure class='interactive' aria-label='{html.escape(alt)}'>{div}"
                            f"<figcaption>{_html_inline(caption or alt)}</figcaption></figure>")
        return (f"<!doctype html>\n<html><head><meta charset='utf-8'><title>{html.escape(self.title)}</title>"
                f"<style>{_CSS}</style></head><body>\n" + "\n".join(body)
                + f"\n<script>{_SORT_JS}</script>\n</body></html>\n")

    def write(self, out_dir: Path) -> tuple[Path, Path]:
        md, page = out_dir / "report.md", out_dir / "report.html"
        md.write_text(self.to_markdown(), encoding="utf-8")
        page.write_text(self.to_html(out_dir), encoding="utf-8")
        return md, page


def _embedded(path: str, base: Path | None) -> str:
    """``path`` as a data: URI when it is a file under ``base``, else as given."""
    file = base / path if base is not None else None
    if file is None or not file.is_file():
        return path
    kind = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
    return f"data:{kind};base64,{base64.b64encode(file.read_bytes()).decode('ascii')}"


_CSS = ("body{font-family:sans-serif;max-width:70em;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse;font-size:.85em;margin:.5em 0 1.5em}"
        "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}caption{text-align:left;font-weight:bold}"
        "img{max-width:100%}figure{margin:1em 0}figure.interactive{max-width:none}"
        "table.sortable th{cursor:pointer;user-select:none}"
        "th[data-sort=asc]::after{content:' \\25B2'}th[data-sort=desc]::after{content:' \\25BC'}")

#: Click a header to sort its table by that column (again: the other way). A column whose every non-empty cell
#: is a number (thousands separators allowed) sorts as numbers, any other as text; empty cells go first.
_SORT_JS = """
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("thead th").forEach(function (th, i) {
    th.title = "sort by " + th.textContent;
    th.addEventListener("click", function () {
      var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      var text = function (r) { return r.cells[i] ? r.cells[i].textContent.trim() : ""; };
      var num = function (r) { return Number(text(r).replace(/,/g, "")); };
      var numeric = rows.every(function (r) { return text(r) === "" || isFinite(num(r)); });
      var asc = th.dataset.sort !== "asc";
      table.querySelectorAll("thead th").forEach(function (h) { delete h.dataset.sort; });
      th.dataset.sort = asc ? "asc" : "desc";
      var key = function (r) { return text(r) === "" ? null : numeric ? num(r) : text(r); };
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        var c = x === y ? 0 : x === null ? -1 : y === null ? 1
              : numeric ? x - y : x.localeCompare(y, undefined, {numeric: true});
        return asc ? c : -c;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
"""


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
