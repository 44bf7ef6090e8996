"""Agent-written Markdown as the web shows it: CommonMark with tables (markdown-it-py), raw
HTML off, so every `<` an agent wrote reaches the page escaped; links only to http(s) and
mailto, opened with `rel="noopener noreferrer"`; an image is never loaded (the CSP's
`img-src 'self'` would block one elsewhere anyway): it is shown as a link to where it
points, or as its text; fenced code coloured by Pygments with CSS classes (static/code.css,
`code_css()`: the CSP allows no inline style)."""

from __future__ import annotations

import functools
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markupsafe import Markup
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

SCHEMES = ("http:", "https:", "mailto:")
"""The only links an agent's text may hold: anything else stays text."""
CODE_CLASS = "hl"
"""The CSS class Pygments' token classes sit under (static/code.css)."""
SOURCE_MAX = 200_000
"""The most characters rendered as Markdown; longer text is shown as it is (escaped)."""


def _safe_link(url: str) -> bool:
    return url.strip().lower().startswith(SCHEMES)


def _link_open(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    token.attrSet("rel", "noopener noreferrer")
    token.attrSet("target", "_blank")
    return str(self.renderToken(tokens, idx, options, env))


def _image(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    """An image as a link to it (never an <img>: nothing is loaded from another host)."""
    token = tokens[idx]
    alt = escapeHtml(self.renderInlineAsText(token.children or [], options, env) or "image")
    src = str(token.attrGet("src") or "")
    if not _safe_link(src):
        return f'<span class="md-img">{alt}</span>'
    return (
        f'<a class="md-img" href="{escapeHtml(src)}" rel="noopener noreferrer" '
        f'target="_blank">image: {alt}</a>'
    )


def _fence(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    language = (token.info or "").strip().split(" ")[0]
    try:
        lexer = get_lexer_by_name(language) if language else None
    except ClassNotFound:
        lexer = None
    if lexer is None:
        return f'<pre class="{CODE_CLASS}"><code>{escapeHtml(token.content)}</code></pre>\n'
    return str(highlight(token.content, lexer, _formatter()))


@functools.cache
def _formatter() -> HtmlFormatter[str]:
    return HtmlFormatter(cssclass=CODE_CLASS, nowrap=False)


@functools.cache
def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable("table")
    md.validateLink = _safe_link  # type: ignore[method-assign]
    md.add_render_rule("link_open", _link_open)
    md.add_render_rule("image", _image)
    md.add_render_rule("fence", _fence)
    md.add_render_rule("code_block", _fence)
    return md


def render(text: str) -> Markup:
    """`text` as HTML, safe to put on a page as it is."""
    if len(text) > SOURCE_MAX:
        return Markup(f'<pre class="plain">{escapeHtml(text)}</pre>')
    return Markup(_parser().render(text))


def code_css() -> str:
    """The stylesheet of the code's colours (static/code.css is this, a test keeps it so)."""
    return str(_formatter().get_style_defs(f".{CODE_CLASS}"))
