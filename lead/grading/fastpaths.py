r"""Fast paths: exact decisions without sympy -- ``True``, ``False``, or ``None`` to defer to math-verify.

Equal canonical strings; multiple-choice letters (``\text{(C)}`` = ``C`` = ``(C)``); ``\text{}`` word answers
(case-insensitive, and decisive: sympy would read ``Evelyn`` as a product of commuting symbols); numbers as
exact fractions (AIME ``025`` = ``25``, AMC ``27.0`` = ``27``, ``\frac12`` = ``0.5`` = ``1/2``, mixed numbers,
``6.72\times10^{-5}``, repeating decimals ``0.1\overline{6}`` = 1/6, decimal commas where no thousands
grouping reads so: ``0,5``, ``1000,99``; percent as ``p`` or ``p/100``); base-n numbers (``52_8``); unordered
lists (``1,-2`` = ``-2, 1``) and ordered tuples / intervals (``(1,2)`` != ``(2,1)``, ``(3,4]`` != ``(3,4)``) of numbers.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from lead.grading.normalise import canon, has_percent

_NUM = r"\d+(?:\.\d*)?|\.\d+"
_PLAIN_NUM_RE = re.compile(rf"(?:{_NUM})")
_THOUSANDS_RE = re.compile(r"[1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?")  # a group never starts with 0
_DECIMAL_COMMA_RE = re.compile(r"(0|\d{4,}),(\d+)")
_REPEATING_RE = re.compile(r"(?P<i>\d*)\.(?P<f>\d*)\\overline\{?(?P<r>\d+)\}?")  # 0.1\overline{6} = 1/6
_SLASH_RE = re.compile(rf"(?P<a>{_NUM})/(?P<b>{_NUM})")
_FRAC_RE = re.compile(rf"\\frac\{{(?P<a>[+-]?(?:{_NUM}))\}}\{{(?P<b>[+-]?(?:{_NUM}))\}}")
_MIXED_RE = re.compile(r"(?P<n>\d+)\\frac\{(?P<a>\d+)\}\{(?P<b>\d+)\}")
_SCI_RE = re.compile(rf"(?P<m>{_NUM})(?:\\times|\\cdot|\*)10\^(?:\{{(?P<e1>[+-]?\d{{1,3}})\}}|(?P<e2>\d))")
_CHOICE_RE = re.compile(r"\(?(?P<c>[A-J])\)?")
_CHOICE_PRED_RE = re.compile(r"\((?P<c>[A-J])\)[A-Za-z]*|(?P<d>[A-J])\)?")
_BASE_RE = re.compile(r"(?P<d>[0-9A-Z]+)_\{?(?P<b>[2-9]|[12]\d|3[0-6])\}?")  # 52_8, 4210_{5}, 1A_{16}
_TEXT_WORD_RE = re.compile(r"\s*\\(?:text|textbf|textrm|mbox|mathrm)\{\s*(?P<w>[^{}]*?)\s*\}\s*\.?\s*")
_INF = {"\\infty": "inf", "+\\infty": "inf", "-\\infty": "-inf"}


def parse_number(clean: str) -> tuple[Fraction, bool] | None:
    """Exact value of a plain number (int, decimal, a/b, \\frac{a}{b}, mixed, a\\times10^{e}), and whether
    it was written as a decimal; None for anything else."""
    if len(clean) > 400:  # also keeps Python's int-string limit (4300 digits) out of reach
        return None
    thousands_ok = not re.search(r",\s", clean)  # "3, 5" is a list, "3,500" is a number
    c = canon(clean)
    sign = 1
    if c.startswith(("+", "-")):
        sign, c = (-1 if c[0] == "-" else 1), c[1:]
    if c.startswith("-"):  # "--5" and the like are not plain numbers
        return None
    try:
        if thousands_ok and _THOUSANDS_RE.fullmatch(c):
            c = c.replace(",", "")
        decimal_comma = _DECIMAL_COMMA_RE.fullmatch(c)
        if decimal_comma:  # 0,111 and 1000,99: no thousands grouping reads so (3,5 stays a list)
            c = f"{decimal_comma.group(1)}.{decimal_comma.group(2)}"
        if _PLAIN_NUM_RE.fullmatch(c):
            return sign * Fraction(c), "." in c
        m = _SLASH_RE.fullmatch(c) or _FRAC_RE.fullmatch(c)
        if m:
            a, b = Fraction(m.group("a")), Fraction(m.group("b"))
            return None if b == 0 else (sign * a / b, "." in c)
        m = _REPEATING_RE.fullmatch(c)
        if m:  # i.f(rrr...) = i + f / 10^|f| + r / (10^|f| (10^|r| - 1)): exact, so not a decimal
            head = Fraction(int(m.group("i") or 0)) + Fraction(
                int(m.group("f") or 0), 10 ** len(m.group("f"))
            )
            tail = Fraction(int(m.group("r")), 10 ** len(m.group("f")) * (10 ** len(m.group("r")) - 1))
            return sign * (head + tail), False
        m = _MIXED_RE.fullmatch(c)
        if m and int(m.group("b")) != 0:
            return sign * (int(m.group("n")) + Fraction(int(m.group("a")), int(m.group("b")))), False
        m = _SCI_RE.fullmatch(c)
        if m:
            e = int(m.group("e1") or m.group("e2"))
            return sign * Fraction(m.group("m")) * Fraction(10) ** e, True
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
    return None


def _numbers_equal(
    pn: tuple[Fraction, bool], gn: tuple[Fraction, bool], pct_p: bool, pct_g: bool
) -> bool | None:
    (p, pdec), (g, gdec) = pn, gn
    if p == g or (pct_g and p == g / 100) or (pct_p and p / 100 == g):
        return True
    if not (pdec or gdec):
        return False
    # A decimal close to the gold (0.3333333 vs 1/3) is left to math-verify's rounding rules.
    if abs(p - g) > Fraction(1, 10_000) * max(Fraction(1), abs(g)):
        return False
    return None


def _split_top(c: str) -> list[str]:
    """Split a canonical string at top-level commas."""
    items, depth, cur = [], 0, []
    i = 0
    while i < len(c):
        ch = c[i]
        if ch == "\\" and i + 1 < len(c):
            tok = c[i : i + 2]
            if tok in ("\\{", "\\}"):
                depth += 1 if tok == "\\{" else -1
            cur.append(tok)
            i += 2
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            items.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    items.append("".join(cur))
    return items


def _outer_brackets(c: str) -> tuple[str, str, str] | None:
    """(open, inner, close) when one bracket pair encloses the whole string."""
    if c.startswith("\\{") and c.endswith("\\}"):
        opener, closer, inner = "\\{", "\\}", c[2:-2]
    elif c[:1] in "([" and c[-1:] in ")]":
        opener, closer, inner = c[0], c[-1], c[1:-1]
    else:
        return None
    depth = 0
    for ch in inner:  # reject "(1)+(2)": the first bracket must close at the very end
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth < 0:
            return None
    return opener, inner, closer


def _as_list(clean: str) -> tuple[str, list[Any]] | None:
    """("set", values) for unordered lists, ("(]", values) etc. for tuples/intervals, else None. Values are
    Fractions or "inf"/"-inf"; None if any item is not a plain number."""
    c = canon(clean)
    outer = _outer_brackets(c)
    if outer:
        opener, inner, closer = outer
        kind = "set" if opener == "\\{" else opener + closer
    else:
        inner, kind = c, "set"
    items = _split_top(inner)
    if len(items) < 2 or (kind == "set" and outer is None and "," not in inner):
        return None
    values: list[Any] = []
    for item in items:
        if item in _INF:
            values.append(_INF[item])
            continue
        num = parse_number(item)
        if num is None or num[1]:  # decimals inside lists: leave to math-verify
            return None
        values.append(num[0])
    return kind, values


def _lists_equal(pl: tuple[str, list[Any]], gl: tuple[str, list[Any]]) -> bool | None:
    (pk, pv), (gk, gv) = pl, gl
    if (pk == "set") != (gk == "set"):
        return None  # a bare list against a tuple: math-verify's strict rules decide
    if pk == "set":
        if any(isinstance(v, str) for v in pv + gv):
            return None
        return sorted(pv) == sorted(gv)
    return pk == gk and pv == gv


def _choice(clean: str, *, pred: bool) -> str | None:
    c = canon(clean)
    if pred:
        m = _CHOICE_PRED_RE.fullmatch(c)
        return (m.group("c") or m.group("d")) if m else None
    m = _CHOICE_RE.fullmatch(c)
    if not m:
        return None
    # A bare gold letter is a choice only for the usual A-E; "(F)" style golds are explicit.
    return m.group("c") if (c != m.group("c") or m.group("c") in "ABCDE") else None


def _word_key(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", s.lower())


def fast_compare(pred: str, gold: str, pc: str, gc: str) -> bool | None:
    """Exact decision without sympy: True, False, or None (defer). pred/gold raw, pc/gc cleaned."""
    cp, cg = canon(pc), canon(gc)
    if not cp or not cg:
        return False
    if cp == cg:
        return True
    gold_choice = _choice(gc, pred=False)
    if gold_choice is not None:
        return _choice(pc, pred=True) == gold_choice
    # A \text{} word on either side: compare words (sympy reads "Even" as the product E*v*e*n).
    word = _TEXT_WORD_RE.fullmatch(gold) or _TEXT_WORD_RE.fullmatch(pred)
    if word and sum(ch.isalpha() for ch in word.group("w")) >= 2:
        return _word_key(cp) == _word_key(cg)
    base = _BASE_RE.fullmatch(cg)
    if base:
        pb = _BASE_RE.fullmatch(cp)
        pdigits = pb.group("d") if pb else (cp if re.fullmatch(r"[0-9A-Z]+", cp) else None)
        if pdigits is not None:
            same_base = pb is None or int(pb.group("b")) == int(base.group("b"))
            return same_base and pdigits.upper().lstrip("0") == base.group("d").upper().lstrip("0")
    gn, pn = parse_number(gc), parse_number(pc)
    if gn is not None and pn is not None:
        return _numbers_equal(pn, gn, has_percent(pred), has_percent(gold))
    gl, pl = _as_list(gc), _as_list(pc)
    if gl is not None and pl is not None:
        return _lists_equal(pl, gl)
    return None
