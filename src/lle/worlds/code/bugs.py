"""Bug injection by `ast` transformation, from named families, deterministic per site index.

`sites(source, function, family)` lists every place in one function where a bug of that family
can go, in a fixed order (`ast.walk` order, then a fixed variant order), so a site index names the
same bug on every machine. `inject(...)` applies one: it splices the replacement into the original
text (comments and layout survive, only the bug differs) and checks, by re-parsing, that the new
text parses to exactly the intended tree; a site whose splice would mean something else is dropped.

Whether an injection really breaks the tests is not decided here: that takes running the tests
(see `catalog.py`, which keeps only the injections that make the visible tests fail).
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass

FAMILIES = ("off_by_one", "wrong_comparison", "wrong_operator", "swapped_arguments", "dropped_edge_case",
            "wrong_return_value")
"""The bug families, in a fixed order."""

DESCRIPTIONS = {
    "off_by_one": "a number, bound or index is off by one",
    "wrong_comparison": "a comparison operator is wrong",
    "wrong_operator": "an arithmetic or boolean operator is wrong",
    "swapped_arguments": "two arguments or operands are swapped",
    "dropped_edge_case": "an edge case or condition is no longer handled",
    "wrong_return_value": "a return statement returns the wrong value",
}

_COMPARE_SWAPS: dict[type[ast.cmpop], tuple[type[ast.cmpop], ...]] = {
    ast.Lt: (ast.LtE, ast.Gt), ast.LtE: (ast.Lt, ast.GtE), ast.Gt: (ast.GtE, ast.Lt), ast.GtE: (ast.Gt, ast.LtE),
    ast.Eq: (ast.NotEq,), ast.NotEq: (ast.Eq,), ast.In: (ast.NotIn,), ast.NotIn: (ast.In,),
    ast.Is: (ast.IsNot,), ast.IsNot: (ast.Is,),
}
_BINOP_SWAPS: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Add, ast.Div: ast.Mult, ast.FloorDiv: ast.Div,
    ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult, ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd, ast.BitXor: ast.BitOr,
    ast.LShift: ast.RShift, ast.RShift: ast.LShift,
}
_NON_COMMUTATIVE = (ast.Sub, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift, ast.RShift)


@dataclass(frozen=True)
class Site:
    """One possible bug: replace the node at `index` (in `ast.walk` order of the function) with `new`."""

    index: int
    new: ast.AST | None
    """Replacement node; None deletes the statement (a `pass` is left when its block would be empty)."""
    what: str
    """What changes, for records and debugging (never shown to the agent)."""


@dataclass(frozen=True)
class Injection:
    family: str
    site: int
    """Index into `sites(source, function, family)`."""
    source: str
    """The whole module with the bug."""
    line: int
    """1-based line of the bug."""
    what: str


def find_function(tree: ast.Module, name: str) -> ast.FunctionDef:
    """The last top-level `def name` (the one that wins at import time)."""
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    if not found:
        raise ValueError(f"no top-level function {name!r} in the module")
    return found[-1]


def _walk(function: ast.FunctionDef) -> list[ast.AST]:
    """Nodes of the function body in `ast.walk` order, the docstring left out."""
    body = list(function.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    nodes: list[ast.AST] = []
    for stmt in body:
        nodes.extend(ast.walk(stmt))
    return nodes


def _int_constant(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


def _int(value: int) -> ast.expr:
    """An int literal as the parser builds it: a negative number is `-` applied to a positive constant."""
    return ast.UnaryOp(ast.USub(), ast.Constant(-value)) if value < 0 else ast.Constant(value)


def _plus(node: ast.expr, delta: int) -> ast.expr:
    op: ast.operator = ast.Add() if delta > 0 else ast.Sub()
    return ast.BinOp(left=copy.deepcopy(node), op=op, right=ast.Constant(abs(delta)))


def _off_by_one(nodes: list[ast.AST]) -> Iterator[tuple[int, ast.AST | None, str]]:
    for i, node in enumerate(nodes):
        if _int_constant(node):
            assert isinstance(node, ast.Constant) and isinstance(node.value, int)
            number = node.value
            for delta in (1, -1):
                yield i, _int(number + delta), f"{number} -> {number + delta}"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range" \
                and node.args and not any(isinstance(a, ast.Starred) for a in node.args):
            stop = node.args[0] if len(node.args) == 1 else node.args[1]
            if not _int_constant(stop):
                for delta in (1, -1):
                    new = copy.deepcopy(node)
                    new.args[0 if len(node.args) == 1 else 1] = _plus(stop, delta)
                    yield i, new, f"range stop {delta:+d}"
        elif isinstance(node, ast.Slice):
            for bound in ("lower", "upper"):
                value = getattr(node, bound)
                if value is not None and not _int_constant(value) and not isinstance(value, ast.UnaryOp):
                    new_slice = copy.deepcopy(node)
                    setattr(new_slice, bound, _plus(value, 1))
                    yield i, new_slice, f"slice {bound} +1"


def _wrong_comparison(nodes: list[ast.AST]) -> Iterator[tuple[int, ast.AST | None, str]]:
    for i, node in enumerate(nodes):
        if isinstance(node, ast.Compare):
            for k, op in enumerate(node.ops):
                for swap in _COMPARE_SWAPS.get(type(op), ()):
                    new = copy.deepcopy(node)
                    new.ops[k] = swap()
                    yield i, new, f"{type(op).__name__} -> {swap.__name__}"


def _wrong_operator(nodes: list[ast.AST]) -> Iterator[tuple[int, ast.AST | None, str]]:
    for i, node in enumerate(nodes):
        if isinstance(node, ast.BinOp | ast.AugAssign) and type(node.op) in _BINOP_SWAPS:
            new = copy.deepcopy(node)
            new.op = _BINOP_SWAPS[type(node.op)]()
            yield i, new, f"{type(node.op).__name__} -> {type(new.op).__name__}"
        elif isinstance(node, ast.BoolOp):
            new_bool = copy.deepcopy(node)
            new_bool.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            yield i, new_bool, f"{type(node.op).__name__} -> {type(new_bool.op).__name__}"


def _swapped_arguments(nodes: list[ast.AST]) -> Iterator[tuple[int, ast.AST | None, str]]:
    for i, node in enumerate(nodes):
        if isinstance(node, ast.Call) and len(node.args) >= 2 \
                and not any(isinstance(a, ast.Starred) for a in node.args):
            for a, b in ((0, 1), (1, 2)):
                if b < len(node.args) and ast.dump(node.args[a]) != ast.dump(node.args[b]):
                    new = copy.deepcopy(node)
                    new.args[a], new.args[b] = new.args[b], new.args[a]
                    yield i, new, f"call arguments {a} and {b} swapped"
        elif isinstance(node, ast.BinOp) and isinstance(node.op, _NON_COMMUTATIVE) \
                and ast.dump(node.left) != ast.dump(node.right):
            new_op = copy.deepcopy(node)
            new_op.left, new_op.right = new_op.right, new_op.left
            yield i, new_op, f"operands of {type(node.op).__name__} swapped"


def _exits(block: list[ast.stmt]) -> bool:
    return bool(block) and isinstance(block[-1], ast.Return | ast.Raise | ast.Continue | ast.Break)


def _dropped_edge_case(nodes: list[ast.AST]) -> Iterator[tuple[int, ast.AST | None, str]]:
    for i, node in enumerate(nodes):
        if isinstance(node, ast.If) and not node.orelse and _exits(node.body):
            yield i, None, "guard clause removed"
        elif isinstance(node, ast.BoolOp):
            for k in range(len(node.values)):
                rest = [copy.deepcopy(v) for j, v in enumerate(node.values) if j != k]
                new = rest[0] if len(rest) == 1 else ast.BoolOp(op=copy.deepcopy(node.op), values=rest)
                yield i, new, f"condition {k} of {type(node.op).__name__} dropped"
        elif isinstance(node, ast.IfExp):
            yield i, copy.deepcopy(node.orelse), "conditional expression: only the else branch kept"
            yield i, copy.deepcopy(node.body), "conditional expression: only the if branch kept"


def _wrong_return_value(nodes: list[ast.AST], params: list[str]) -> Iterator[tuple[int, ast.AST | None, str]]:
    returns = [(i, n) for i, n in enumerate(nodes) if isinstance(n, ast.Return) and n.value is not None]
    constants = sorted({repr(n.value.value) for _, n in returns if isinstance(n.value, ast.Constant)})
    for i, node in returns:
        value = node.value
        assert value is not None
        options: list[tuple[ast.expr, str]] = []
        if isinstance(value, ast.Constant):
            v = value.value
            if isinstance(v, bool):
                options.append((ast.Constant(not v), f"return {v} -> {not v}"))
            else:
                for other in constants:
                    if other != repr(v):
                        options.append((ast.parse(other, mode="eval").body, f"return {v!r} -> {other}"))
                if not options and type(v) is int:
                    options.append((_int(-v if v else 1), f"return {v} -> {-v if v else 1}"))
                if not options and isinstance(v, str):
                    options.append((ast.Constant("" if v else " "), f"return {v!r} -> {'' if v else ' '!r}"))
        elif isinstance(value, ast.Compare | ast.BoolOp) or (
                isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not)):
            negated = value.operand if isinstance(value, ast.UnaryOp) else ast.UnaryOp(ast.Not(), value)
            options.append((copy.deepcopy(negated), "boolean return negated"))
        elif isinstance(value, ast.Name):
            options += [(ast.Name(p, ast.Load()), f"return {value.id} -> {p}") for p in params if p != value.id]
        for new_value, what in options:
            yield i, ast.Return(value=new_value), what


def sites(source: str, function: str, family: str) -> list[Site]:
    """Every site of `family` in `function`, in a fixed order."""
    tree = ast.parse(source)
    fn = find_function(tree, function)
    nodes = _walk(fn)
    makers: dict[str, Callable[[], Iterator[tuple[int, ast.AST | None, str]]]] = {
        "off_by_one": lambda: _off_by_one(nodes),
        "wrong_comparison": lambda: _wrong_comparison(nodes),
        "wrong_operator": lambda: _wrong_operator(nodes),
        "swapped_arguments": lambda: _swapped_arguments(nodes),
        "dropped_edge_case": lambda: _dropped_edge_case(nodes),
        "wrong_return_value": lambda: _wrong_return_value(nodes, [a.arg for a in fn.args.args]),
    }
    if family not in makers:
        raise ValueError(f"unknown bug family {family!r}; use one of {', '.join(FAMILIES)}")
    return [Site(i, new, what) for i, new, what in makers[family]()]


def inject(source: str, function: str, family: str, site: int) -> Injection | None:
    """`source` with bug `site` of `family` in `function`; None when that splice cannot be made faithfully."""
    candidates = sites(source, function, family)
    if not 0 <= site < len(candidates):
        return None
    chosen = candidates[site]
    target = _walk(find_function(ast.parse(source), function))[chosen.index]
    expected = _expected(source, function, chosen)
    for text in _splices(source, target, chosen.new):
        try:
            if text != source and ast.dump(ast.parse(text)) in expected:
                return Injection(family, site, text, int(getattr(target, "lineno", 0)), chosen.what)
        except SyntaxError:
            continue
    return None


def _expected(source: str, function: str, chosen: Site) -> set[str]:
    """ast.dump of the module with the site applied (a deleted statement may leave a `pass` behind)."""
    dumps = set()
    for leave_pass in (False, True):
        tree = ast.parse(source)
        target = _walk(find_function(tree, function))[chosen.index]
        for parent in ast.walk(tree):
            for _name, value in ast.iter_fields(parent):
                if isinstance(value, list) and any(v is target for v in value):
                    k = next(j for j, v in enumerate(value) if v is target)
                    if chosen.new is not None:
                        value[k] = copy.deepcopy(chosen.new)
                    elif leave_pass and len(value) == 1:
                        value[k] = ast.Pass()
                    else:
                        del value[k]
                elif value is target and chosen.new is not None:
                    setattr(parent, _name, copy.deepcopy(chosen.new))
        dumps.add(ast.dump(tree))
    return dumps


def _offsets(source: str) -> list[int]:
    starts, total = [0], 0
    for line in source.splitlines(keepends=True):
        total += len(line)
        starts.append(total)
    return starts


def _char_index(source: str, starts: list[int], lineno: int, col_byte: int) -> int:
    line = source[starts[lineno - 1]:starts[lineno]]
    return starts[lineno - 1] + len(line.encode()[:col_byte].decode())


def _splices(source: str, target: ast.AST, new: ast.AST | None) -> Iterator[str]:
    starts = _offsets(source)
    lineno, end_lineno = getattr(target, "lineno", None), getattr(target, "end_lineno", None)
    col, end_col = getattr(target, "col_offset", None), getattr(target, "end_col_offset", None)
    if lineno is None or end_lineno is None or col is None or end_col is None:
        return
    begin = _char_index(source, starts, lineno, col)
    end = _char_index(source, starts, end_lineno, end_col)
    if new is None:
        # Whole lines only: the statement must stand alone on its lines.
        head = source[starts[lineno - 1]:begin]
        tail = source[end:starts[end_lineno]] if end_lineno < len(starts) else source[end:]
        if head.strip() or (tail.strip() and not tail.strip().startswith("#")):
            return
        yield source[:starts[lineno - 1]] + source[starts[end_lineno]:]
        yield source[:starts[lineno - 1]] + head + "pass\n" + source[starts[end_lineno]:]
        return
    text = ast.unparse(new)
    yield source[:begin] + text + source[end:]
    if isinstance(new, ast.expr):
        yield source[:begin] + "(" + text + ")" + source[end:]
