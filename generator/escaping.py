"""Values read from files, configs or the command line are data: escape them wherever they are placed.

Three places show such values, each with its own rules:
- Markdown (the article's source, also rendered by code hosts): every ASCII punctuation character that can
  start inline markup is backslash-escaped, and so is a block marker at the start of the value; whitespace
  and control characters become single spaces, so a value cannot open a new line or block. A code span gets
  a fence longer than any run of backticks in it.
- HTML: the Markdown is rendered with raw HTML disabled, and the layout template autoescapes.
- The terminal: rich markup is escaped and control characters (escape sequences among them) are shown as
  their Python escapes, so a value can neither restyle nor hide text.
"""

import re

from rich.markup import escape as rich_escape

# CommonMark lets a backslash escape any ASCII punctuation; these are the ones that can begin markup inline
# (emphasis, code, links, images, autolinks, raw HTML, entities, strikethrough, table cells).
_INLINE = re.compile(r"([\\`*_\[\]<>!|~&])")
# At the start of a value: headings, block quotes, lists, thematic breaks, setext underlines.
_BLOCK_START = re.compile(r"^(?:#{1,6}(?=\s|$)|>|[-+](?=\s|$)|=+$|-+$|\d{1,9}(?=[.)](?:\s|$)))")
_SPACE = re.compile(r"[\s\x00-\x1f\x7f-\x9f]+")


class Markdown(str):
    """Markdown produced by the tool itself (a code span, say): placed as it is, never escaped again."""


def one_line(value: str) -> str:
    """Whitespace and control characters folded into single spaces."""
    return _SPACE.sub(" ", value).strip()


def markdown_text(value: object) -> Markdown:
    """A value as literal Markdown text: it renders as exactly these characters and never as markup."""
    if isinstance(value, Markdown):
        return value
    text = _INLINE.sub(r"\\\1", one_line(str(value)))
    start = _BLOCK_START.match(text)
    if start:  # "# x" would be a heading, "1. x" a list: escape the marker's punctuation
        end = start.end()
        text = text[:end] + "\\" + text[end:] if text[:end].isdigit() else "\\" + text
    return Markdown(text)


def markdown_code(value: object, table: bool = False) -> Markdown:
    """A value as a code span. In a table cell a pipe must be escaped even inside code (GFM)."""
    text = one_line(str(value))
    if not text:
        return Markdown("")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    padded = f" {text} " if text.startswith("`") or text.endswith("`") else text
    if table:
        padded = padded.replace("|", "\\|")
    return Markdown(f"{fence}{padded}{fence}")


def terminal_text(value: object) -> str:
    """A value for a rich console: markup escaped, control characters shown as escapes, not obeyed."""
    return rich_escape(plain_terminal_text(value))


def plain_terminal_text(value: object) -> str:
    """A value for print(): control characters shown as escapes (no rich markup is interpreted there)."""
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in str(value))


def last_line(text: str) -> str:
    """The last non-empty line of a text, stripped ('' where there is none)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def one_line_error(error: BaseException) -> str:
    """An exception in one line: 'TypeError: the last line of its message'."""
    line = last_line(str(error))
    return f"{type(error).__name__}: {line}" if line else type(error).__name__


def heading_slug(text: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation and symbols dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")
