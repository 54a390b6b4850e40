r"""Clean-up of an answer string before any comparison: pure string work.

Unicode maths signs, ``$``/``\(``/``\[``, ``\left``/``\right``, ``\!``, ``\,``, ``\dfrac``, ``\frac12``,
degrees, ``\%``, currency ``\$``, trailing units (``\text{ cm}``, ``5 cm``), thousands separators
(``10,\!080``), ``\text{}`` wrappers, a leading ``x =`` / ``x \in``, an ordinal for its number
(``21^{\text{st}} \text{ term}``, ``the 5^\mathrm{th} place``, ``3rd``: 21, 5, 3; only with the suffix English
gives that number). Whitespace is kept (single spaces) so that ``\cot x`` stays valid LaTeX for sympy;
:func:`canon` is the whitespace-free form for exact comparisons.
"""

from __future__ import annotations

import functools
import re

_UNICODE_MAP = {
    "\u2212": "-",
    "\u2013": "-",
    "\u2014": "-",
    "\u00d7": r"\times ",
    "\u22c5": r"\cdot ",
    "\u00b7": r"\cdot ",
    "\u00f7": r"\div ",
    "\u03c0": r"\pi ",
    "\u221e": r"\infty ",
    "\u2264": r"\le ",
    "\u2265": r"\ge ",
    "\u2260": r"\ne ",
    "\u221a": r"\sqrt",
    "\u00b0": r"^\circ",
    "\u222a": r"\cup ",
    "\u2229": r"\cap ",
    "\u00b1": r"\pm ",
    "\u00a0": " ",
    "\u00a2": " cents",  # ¢
    "\u20ac": " ",  # € (a currency sign, like \$)
    "\u00a3": " ",  # £
    "\u00a5": " ",  # ¥
    "\u00b2": "^2",  # m²
    "\u00b3": "^3",
    "\u2009": " ",
    "\u202f": " ",
    "\u200b": "",
    "\ufeff": "",
}
_UNICODE_TABLE = str.maketrans(_UNICODE_MAP)
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_DBL_BACKSLASH = "\x00"  # placeholder for `\\` (matrix rows) while single-backslash commands are edited
_UNIT_WORDS = (
    r"(?:(?:square|sq\.?|cubic)\s+)?(?:units?|cm|mm|km|meters?|metres?|centimeters?|kilometers?|inch(?:es)?"
    r"|feet|foot|ft|yards?|miles?|mph|kg|grams?|pounds?|lbs?|ounces?|oz|liters?|litres?|gallons?|degrees?"
    r"|cents?|dollars?|euros?|seconds?|sec|minutes?|mins?|hours?|hrs?|days?|weeks?|months?|years?"
    r"|m(?=\s*\^\s*\{?\s*[23]))"  # metres only with a power (5m alone may be 5 times m)
)
_TEXT_UNIT_RE = re.compile(
    r"(?P<body>.*?[0-9}])\s*\\text\{\s*(?P<unit>[A-Za-z][A-Za-z .]*)\}(?:\s*\^\s*\{?\s*[23]\s*\}?)?\s*",
    re.S,
)
_WORD_UNIT_RE = re.compile(
    rf"(?P<body>.*?[0-9}}])\s*{_UNIT_WORDS}\.?(?:\s*\^\s*\{{?\s*[23]\s*\}}?)?\s*", re.S
)
_TEXT_CMD_RE = re.compile(
    r"\\(?:textbf|textrm|textit|textup|texttt|textsf|textnormal|mathrm|mathbf|mathit|mbox|hbox)\{"
)
_TEXT_WRAP_RE = re.compile(r"\\text\{([^{}]*)\}")
_ASSIGN_RE = re.compile(r"[A-Za-z](?:_\{?\w+\}?)?\s*(?:=|\\in(?![A-Za-z]))\s*(?P<rhs>[^=]+)", re.S)


# An ordinal, as a whole answer: "the" first, the suffix as a superscript or not, one word after ("term").
_ORDINAL_RE = re.compile(
    r"(?:the\s+)?(?P<n>\d+)\s*(?:\^\s*\{?\s*(?P<sup>st|nd|rd|th)\s*\}?|(?P<suffix>st|nd|rd|th))(?:\s+[A-Za-z]+)?",
    re.I,
)


def ordinal_suffix(n: int) -> str:
    """The English suffix of the ordinal ``n``: 1st, 2nd, 3rd, 4th, 11th-13th, 21st, 112th.

    >>> [ordinal_suffix(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 112)]
    ['st', 'nd', 'rd', 'th', 'th', 'th', 'th', 'st', 'nd', 'th']
    """
    if n % 100 in (11, 12, 13):
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


def drop_ordinal(clean: str) -> str:
    """The number of an ordinal answer (``21^{st} term`` -> ``21``); anything else as it is, a suffix that is not
    this number's too (``2^{th}`` stays: it may be a power).

    >>> drop_ordinal("21^{st} term"), drop_ordinal("the 5^th place"), drop_ordinal("3rd"), drop_ordinal("2^{th}")
    ('21', '5', '3', '2^{th}')
    """
    m = _ORDINAL_RE.fullmatch(clean)
    if m is None or (m["sup"] or m["suffix"]).lower() != ordinal_suffix(int(m["n"])):
        return clean
    return m["n"]


_PERCENT_RE = re.compile(r"\\?%|(?<=[\d}\s])(?:percent(?:age)?|pct)\b", re.I)


def has_percent(s: str) -> bool:
    """Whether an answer is written as a percentage (``28\\%``, ``28 percent``, ``28 pct``)."""
    return _PERCENT_RE.search(s) is not None


def clean(s: str) -> str:
    r"""Canonical LaTeX for an answer string, whitespace kept (single spaces)."""
    # Golds and popular answers repeat across a group: cache, but only short strings (memory).
    return clean_cached(s) if len(s) <= 1000 else clean_uncached(s)


@functools.lru_cache(maxsize=8192)
def clean_cached(s: str) -> str:
    return clean_uncached(s)


def clean_uncached(s: str) -> str:
    s = _CONTROL_RE.sub(" ", s.translate(_UNICODE_TABLE)).strip()
    # Thousands separators written with LaTeX spacing, before spacing commands become plain spaces.
    s = re.sub(r"(\d),\s*\\!\s*(?=\d{3}(?!\d))", r"\1,", s)
    s = re.sub(r"(\d)\s*\{\s*,\s*\}\s*(?=\d{3}(?!\d))", r"\1,", s)
    s = re.sub(r"(\d)\\[,;: ](?=\d{3}(?!\d))", r"\1", s)
    s = s.replace("\\$", " ")  # currency
    s = s.replace("\\\\", _DBL_BACKSLASH)
    s = re.sub(r"\\[()\[\]]", " ", s)  # \( \) \[ \] math delimiters
    s = s.replace("$", " ")
    s = re.sub(r"\\(?:left|right)(?![A-Za-z])\s*\.?", "", s)
    s = re.sub(r"\\(?:[bB]igg?[lr]?)(?![A-Za-z])", "", s)
    s = re.sub(r"\\(?:displaystyle|textstyle|scriptstyle)(?![A-Za-z])", "", s)
    s = re.sub(r"\\(?:[!,;: ]|q?quad(?![A-Za-z]))|~", " ", s)
    s = re.sub(r"\\[dtc]frac(?![A-Za-z])", r"\\frac", s)
    s = re.sub(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ(?![A-Za-z])|\\degree(?![A-Za-z])", "", s)
    s = _PERCENT_RE.sub("", s)
    s = _TEXT_CMD_RE.sub(r"\\text{", s)
    s = re.sub(r"\s*\\text\{\s*(?:and|or)\s*\}\s*", ", ", s)  # "6 \text{ and } 8": a list
    s = re.sub(r"(?<=[\d}])\s+and\s+(?=[-\d\\])", ", ", s)  # "12 and 13": a list
    for rx in (_TEXT_UNIT_RE, _WORD_UNIT_RE):
        m = rx.fullmatch(s)
        if m:
            s = m.group("body")
    prev = None
    while prev != s:  # unwrap \text{...}, innermost first
        prev, s = s, _TEXT_WRAP_RE.sub(r"\1", s)
    s = re.sub(r"\\frac\s*(\d)\s*(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\frac\s*(\{[^{}]*\})\s*(\d)", r"\\frac\1{\2}", s)
    s = re.sub(r"\\frac\s*(\d)\s*\{", r"\\frac{\1}{", s)
    s = re.sub(r"\\sqrt\s*(\d)", r"\\sqrt{\1}", s)
    s = re.sub(r"\s+", " ", s).strip().rstrip(".").strip()
    s = drop_ordinal(s)
    return s.replace(_DBL_BACKSLASH, "\\\\")


def drop_assignment(clean: str) -> str:
    """``x = 5`` -> ``5``, ``x \\in [-2,7]`` -> ``[-2,7]``: the value of a one-variable assignment (compared
    when the gold is a value, not an equation)."""
    m = _ASSIGN_RE.fullmatch(clean)
    return m.group("rhs").strip() if m and m.group("rhs").strip() else clean


_LESS = r"(?P<{0}><|\\lt|\\le(?:q|qslant)?|\\leqslant|<=)"
_MORE = r"(?P<{0}>>|\\gt|\\ge(?:q|qslant)?|\\geqslant|>=)"
_VARIABLE = r"(?P<v>[A-Za-z](?:_\{?\w+\}?)?|\\(?:alpha|beta|gamma|theta|lambda|mu|phi|omega|varphi|vartheta))"
_CHAIN_RES = tuple(
    re.compile(rf"(?P<a>[^<>]+?)\s*{op.format('o1')}\s*{_VARIABLE}\s*{op.format('o2')}\s*(?P<b>[^<>]+)")
    for op in (_LESS, _MORE)
)
_INTERVAL_RE = re.compile(r"[(\[][^(\[\])]*,[^(\[\])]*[)\]]")


def looks_like_interval(clean: str) -> bool:
    """``(a, b)``, ``[a, b)``, ...: two ends in brackets (a pair ``(a, b)`` reads so too)."""
    return _INTERVAL_RE.fullmatch(clean.strip()) is not None


def inequality_as_interval(clean: str) -> str | None:
    r"""A chained inequality in one variable as interval notation, or None: ``-2 < x < \sqrt{5}`` ->
    ``(-2, \sqrt{5})``, ``0 \le t < 1`` -> ``[0, 1)``, ``5 > x \ge 1`` -> ``[1, 5)``. Both signs must point the
    same way; a strict one is an open end.

    >>> inequality_as_interval("-2 < x < \\sqrt{5}"), inequality_as_interval("5 > y \\ge 1")
    ('(-2, \\sqrt{5})', '[1, 5)')
    >>> inequality_as_interval("x < 3") is None
    True
    """
    for increasing, pattern in zip((True, False), _CHAIN_RES, strict=True):
        m = pattern.fullmatch(clean.strip())
        if not m:
            continue
        a, b = m.group("a").strip(), m.group("b").strip()
        ends = [m.group("o1"), m.group("o2")]
        if not increasing:  # b < x < a, read right to left
            a, b, ends = b, a, ends[::-1]
        if not a or not b:
            return None
        strict = [e in ("<", ">", "\\lt", "\\gt") for e in ends]
        return ("(" if strict[0] else "[") + f"{a}, {b}" + (")" if strict[1] else "]")
    return None


def canon(clean: str) -> str:
    """Whitespace-free form of a cleaned answer, for exact comparisons."""
    s = re.sub(r"\s+", "", clean)
    return re.sub(r"([_^])\{(\w)\}", r"\1\2", s)
