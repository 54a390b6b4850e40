r"""Cheap guards in front of sympy: refuse what could stall the reward loop.

Length, non-ASCII, nesting depth, power towers, huge exponents and factorials, big operators (``\sum``,
``\prod``, ``\int``, ``\lim``). A refused answer is graded ``False`` (counted ``unparseable``). They keep the
in-process sympy step interruptible by signals; the worker pool is the hard, process-level guarantee.
"""

from __future__ import annotations

import re

# Measured with math-verify 0.9.0: nested \frac depth 12 takes ~2.5 s and depth 15 more than 10 s;
# 30 nested parentheses ~4.5 s; 10^{10^{10}} or (10^6)! never finish.
_MAX_SYMPY_CHARS = 400
_MAX_NESTING = 10
_MAX_FRACS = 16
_MAX_EXPONENT = 10_000
_MAX_FACTORIAL = 1000
_MAX_BINOM_LITERAL = 10_000

_BIG_OPS_RE = re.compile(
    r"\\(?:sum|prod|coprod|int|iint|iiint|oint|lim|limsup|liminf|bigcup|bigcap|partial)(?![A-Za-z])"
)


def _group_end(s: str, i: int) -> int:
    """Index just past the brace/paren group starting at s[i] (end of string if unbalanced)."""
    opener = s[i]
    closer = "}" if opener == "{" else ")"
    depth = 0
    for j in range(i, len(s)):
        if s[j] == opener:
            depth += 1
        elif s[j] == closer:
            depth -= 1
            if depth == 0:
                return j + 1
    return len(s)


def _exponent_token(s: str, i: int) -> tuple[str, int]:
    """The exponent after a `^` at s[i-1]: a braced/paren group, a command (+ its groups), a digit run
    (conservatively: TeX would take one digit, plain-text parsers the whole run) or one character."""
    while i < len(s) and s[i] == " ":
        i += 1
    start = i
    if i < len(s) and s[i] in "+-":
        i += 1
    if i >= len(s):
        return s[start:], i
    if s[i] in "{(":
        end = _group_end(s, i)
    elif s[i] == "\\":
        m = re.match(r"\\[A-Za-z]+", s[i:])
        end = i + (len(m.group()) if m else 2)
        while end < len(s) and s[end] == "{":
            end = _group_end(s, end)
    elif s[i].isdigit():
        m = re.match(r"\d+", s[i:])
        end = i + len(m.group()) if m else i + 1
    else:
        end = i + 1
    return s[start:end], end


def _max_literal(s: str) -> int:
    """Largest integer literal in s (a huge stand-in for literals too long to convert)."""
    best = 0
    for lit in re.findall(r"\d+", s):
        if len(lit.lstrip("0")) > 9:
            return 10**9
        best = max(best, int(lit))
    return best


def _group_before(s: str, i: int) -> str:
    """Content of the ``(...)``/``{...}`` group that ends just before s[i] (spaces skipped), else ""."""
    j = i - 1
    while j >= 0 and s[j] == " ":
        j -= 1
    if j < 0 or s[j] not in ")}":
        return ""
    closer = s[j]
    opener = "(" if closer == ")" else "{"
    depth = 0
    for k in range(j, -1, -1):
        if s[k] == closer:
            depth += 1
        elif s[k] == opener:
            depth -= 1
            if depth == 0:
                return s[k + 1 : j]
    return s[:j]


def _max_power(s: str) -> int:
    """Largest effective integer exponent in s: powers of powers multiply, ``((3^{100})^{100})^{100}``
    counts 10^6 (nesting is capped, so the recursion is shallow)."""
    best = 0
    for m in re.finditer(r"\^", s):
        outer = max(_max_literal(_exponent_token(s, m.end())[0]), 1)
        base = _group_before(s, m.start())
        inner = _max_power(base) if "^" in base else 1
        best = max(best, outer * max(inner, 1))
    return best


def guard(clean: str) -> str | None:
    """Why ``clean`` must not reach sympy (a short reason), or None when it is safe enough."""
    if len(clean) > _MAX_SYMPY_CHARS:
        return "too long"
    if not clean.isascii():
        return "non-ascii"
    if _BIG_OPS_RE.search(clean):
        return "big operator"
    depth = deepest = 0
    for ch in clean:
        if ch in "({[":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")}]":
            depth -= 1
    if deepest > _MAX_NESTING:
        return "nested too deep"
    if clean.count("\\frac") > _MAX_FRACS:
        return "too many fractions"
    s = clean.replace("**", "^")
    for m in re.finditer(r"\^", s):
        exp, end = _exponent_token(s, m.end())
        if "^" in exp or s[end:].lstrip(" ").startswith("^"):  # a^{b^c}, a^b^c
            return "power tower"
    if _max_power(s) > _MAX_EXPONENT:
        return "huge exponent"
    # Factorials, binomials and Gamma are evaluated eagerly by sympy: their arguments must stay small.
    for m in re.finditer(r"(\d*)\s*!", s):
        arg = m.group(1) or _group_before(s, m.start())
        if "^" in arg or _max_literal(arg) > _MAX_FACTORIAL:
            return "huge factorial"
    for m in re.finditer(r"\\(?:binom|dbinom|tbinom|Gamma)(?![A-Za-z])", s):
        args, end = "", m.end()
        for _ in range(2):
            while end < len(s) and s[end] == " ":
                end += 1
            if end < len(s) and s[end] in "{(":
                stop = _group_end(s, end)
                args, end = args + s[end:stop], stop
        if "^" in args or _max_literal(args) > _MAX_BINOM_LITERAL:
            return "huge binomial"
    if "\\choose" in s and ("^" in s or _max_literal(s) > _MAX_BINOM_LITERAL):
        return "huge binomial"
    return None
