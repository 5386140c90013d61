"""AST-located mutation operators: each candidate is one small edit of the source text, deterministic.

Operators: ``compare`` (< and <=, > and >=, == and !=, in and not in, is and is not swapped),
``binop`` (+ and -, * and //, / and *), ``boolop`` (and and or), ``off_by_one`` (an integer literal
n made n+1 or n-1), ``drop_branch`` (an ``if``'s body replaced by ``pass``), ``negate`` (an ``if``
or ``while`` test negated) and ``wrong_default`` (a parameter's literal default changed). Only nodes
inside function bodies are mutated; every candidate's source still parses.
"""

from __future__ import annotations

import ast
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = ["OPERATORS", "Mutation", "candidates", "shuffled"]

OPERATORS = ("compare", "binop", "boolop", "off_by_one", "drop_branch", "negate", "wrong_default")
_COMPARE = {ast.Lt: ("<", "<="), ast.LtE: ("<=", "<"), ast.Gt: (">", ">="), ast.GtE: (">=", ">"),
            ast.Eq: ("==", "!="), ast.NotEq: ("!=", "=="), ast.In: ("in", "not in"),
            ast.NotIn: ("not in", "in"), ast.Is: ("is", "is not"), ast.IsNot: ("is not", "is")}
_BINOP = {ast.Add: ("+", "-"), ast.Sub: ("-", "+"), ast.Mult: ("*", "//"), ast.FloorDiv: ("//", "*"),
          ast.Div: ("/", "*")}
_BOOLOP = {ast.And: ("and", "or"), ast.Or: ("or", "and")}


@dataclass(frozen=True)
class Mutation:
    """Replace bytes ``start:end`` of ``file`` (``before``) with ``after``; lines ``line..end_line``."""

    file: str
    operator: str
    function: str
    line: int
    end_line: int
    start: int
    end: int
    before: str
    after: str

    def apply(self, source: bytes) -> bytes:
        return source[:self.start] + self.after.encode("utf-8") + source[self.end:]

    @property
    def id(self) -> str:
        return f"{self.file}:{self.line}:{self.operator}:{self.start}"


class _Offsets:
    def __init__(self, source: bytes) -> None:
        self.source = source
        self.starts = [0]
        for index, byte in enumerate(source):
            if byte == 10:
                self.starts.append(index + 1)

    def at(self, line: int, col: int) -> int:
        return self.starts[line - 1] + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (self.at(node.lineno, node.col_offset),  # type: ignore[attr-defined]
                self.at(node.end_lineno, node.end_col_offset))  # type: ignore[attr-defined]


def _operator_gap(off: _Offsets, left: ast.AST, right: ast.AST, token: str) -> tuple[int, int] | None:
    """The byte span of ``token`` between two operands, if the gap holds only it (with spaces, parens)."""
    start, end = off.span(left)[1], off.span(right)[0]
    gap = off.source[start:end].decode("utf-8", "replace")
    if " ".join(gap.replace("(", " ").replace(")", " ").split()) != token:
        return None
    words = token.split()
    first = gap.find(words[0])
    last = gap.rfind(words[-1]) + len(words[-1])
    return start + len(gap[:first].encode()), start + len(gap[:last].encode())


def _functions(tree: ast.AST) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                yield name, child
                yield from walk(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
    yield from walk(tree, "")


def _int_literal(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _in_function(file: str, source: bytes) -> Iterator[Mutation]:
    tree = ast.parse(source)
    off = _Offsets(source)
    seen: set[int] = set()
    for function, func in _functions(tree):
        def make(operator: str, node: ast.AST, start: int, end: int, after: str,
                 function: str = function) -> Mutation:
            before = source[start:end].decode("utf-8")
            return Mutation(file, operator, function, node.lineno, node.end_lineno or node.lineno,  # type: ignore[attr-defined]
                            start, end, before, after)

        for default in [*func.args.defaults, *(d for d in func.args.kw_defaults if d is not None)]:
            value = getattr(default, "value", None) if isinstance(default, ast.Constant) else None
            start, end = off.span(default)
            if isinstance(value, bool):
                yield make("wrong_default", func, start, end, str(not value))
            elif type(value) is int:
                yield make("wrong_default", func, start, end, str(value + 1))
        for stmt in func.body:
            for node in ast.walk(stmt):
                if id(node) in seen or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
                                                  | ast.Lambda):
                    continue
                seen.add(id(node))
                if isinstance(node, ast.Compare) and type(node.ops[0]) in _COMPARE:
                    token, swap = _COMPARE[type(node.ops[0])]
                    gap = _operator_gap(off, node.left, node.comparators[0], token)
                    if gap:
                        yield make("compare", node, *gap, swap)
                elif isinstance(node, ast.BinOp) and type(node.op) in _BINOP:
                    token, swap = _BINOP[type(node.op)]
                    gap = _operator_gap(off, node.left, node.right, token)
                    if gap and not (isinstance(node.left, ast.Constant) and isinstance(node.left.value, str)):
                        yield make("binop", node, *gap, swap)
                elif isinstance(node, ast.BoolOp):
                    token, swap = _BOOLOP[type(node.op)]
                    gap = _operator_gap(off, node.values[0], node.values[1], token)
                    if gap:
                        yield make("boolop", node, *gap, swap)
                elif (value := _int_literal(node)) is not None and value < 1000:
                    start, end = off.span(node)
                    yield make("off_by_one", node, start, end, str(value + 1) if value <= 0 else str(value - 1))
                if isinstance(node, ast.If | ast.While) and node.test.lineno == node.lineno:
                    start, end = off.span(node.test)
                    text = source[start:end].decode("utf-8")
                    if "\n" not in text:
                        yield make("negate", node.test, start, end, f"not ({text})")
                if (isinstance(node, ast.If) and not node.orelse and node.body[0].lineno > node.lineno
                        and node.body[0].col_offset > node.col_offset):
                    first, last = node.body[0], node.body[-1]
                    start = off.at(first.lineno, first.col_offset)
                    end = off.at(last.end_lineno or last.lineno, last.end_col_offset or 0)
                    yield make("drop_branch", node, start, end, "pass")


def candidates(file: str, source: bytes, keep: Callable[[Mutation], bool] = lambda _: True) -> list[Mutation]:
    """Every mutation of a module's function bodies that ``keep`` accepts (checked first: parsing a big
    module once per candidate is the slow part) and whose result still parses, in source order."""
    result = []
    for mutation in _in_function(file, source):
        if not keep(mutation):
            continue
        try:
            ast.parse(mutation.apply(source))
        except SyntaxError:
            continue
        result.append(mutation)
    return result


def shuffled(mutations: list[Mutation], seed: int) -> list[Mutation]:
    """A deterministic order for a seed, operators interleaved (the same seed, the same candidates first)."""
    rng = random.Random(seed)
    groups: dict[str, list[Mutation]] = {}
    for mutation in sorted(mutations, key=lambda m: m.id):
        groups.setdefault(mutation.operator, []).append(mutation)
    for group in groups.values():
        rng.shuffle(group)
    names = sorted(groups)
    ordered: list[Mutation] = []
    while any(groups.values()):  # operators take turns, so no one operator crowds out the others
        for name in names:
            if groups[name]:
                ordered.append(groups[name].pop())
    return ordered
