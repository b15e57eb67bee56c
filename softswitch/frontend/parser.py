"""Parse preprocessed P4 text with the lark grammar `p4.lark` and build the AST (`ast.py`).

The LALR tables are built once per process (a cache, not state). Type names are told apart from other
names while lexing (see `_TypeNamePostLex`), as p4c's parser does.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import lark
from lark import Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from softswitch.frontend import ast as A
from softswitch.frontend.errors import P4Error, unsupported
from softswitch.frontend.ir import Annotation, SourceLoc
from softswitch.frontend.preprocess import Preprocessed

BUILTIN_TYPE_NAMES = frozenset({
    "standard_metadata_t", "packet_in", "packet_out", "register", "counter", "direct_counter", "meter",
    "direct_meter", "CounterType", "MeterType", "HashAlgorithm", "CloneType", "V1Switch", "action_profile",
    "action_selector", "Checksum16",
})
"""Type names that core.p4 / v1model.p4 declare (their declarations live in `builtins.py`)."""

GENERIC_CALLEES = frozenset({
    "extract", "lookahead", "emit", "digest", "hash", "random", "verify_checksum", "update_checksum",
    "verify_checksum_with_payload", "update_checksum_with_payload", "log_msg", "execute_meter", "read",
})
"""Functions/methods that may be called with explicit type arguments (`packet.lookahead<bit<8>>()`)."""

UNSUPPORTED_WORDS = {
    "extern": "extern declaration", "package": "package declaration", "abstract": "abstract method",
    "break": "break statement", "continue": "continue statement", "this": "this", "list": "list type", "while": "while loop",
}
"""Identifiers that start a P4 construct outside the subset; refused where they appear."""

_DECL_KEYWORDS = frozenset({"HEADER", "HEADER_UNION", "STRUCT", "ENUM", "CONTROL", "PARSER"})


class _Refused(Exception):
    def __init__(self, token: Token, what: str) -> None:
        super().__init__(what)
        self.token = token
        self.what = what


class _CtorParams:
    """A control's constructor parameter list, before it is folded into `ControlA`."""

    def __init__(self, params: tuple[A.ParamA, ...]) -> None:
        self.params = params


class _TypeNamePostLex:
    """Re-types identifiers that name a type as TYPE_IDENTIFIER, learning declared type names as it goes
    (P4 declares before use), and `<` after a generic callee as GENERIC_LT."""

    always_accept = ("IDENTIFIER",)

    def process(self, stream):
        names = set(BUILTIN_TYPE_NAMES)
        pending_decl = False  # after header/struct/enum/control/parser: the next identifier is a type name
        in_typedef = False
        typedef_last: str | None = None
        prev: Token | None = None
        for tok in stream:
            if tok.type in _DECL_KEYWORDS:
                pending_decl = True
            elif tok.type in ("TYPEDEF", "TYPE"):
                in_typedef, typedef_last = True, None
            elif tok.type == "IDENTIFIER":
                if tok.value in UNSUPPORTED_WORDS:
                    raise _Refused(tok, UNSUPPORTED_WORDS[tok.value])
                if pending_decl:
                    names.add(tok.value)
                    pending_decl = False
                if in_typedef:
                    typedef_last = tok.value
                if tok.value in names:
                    tok.type = "TYPE_IDENTIFIER"
            elif tok.type == "SEMICOLON" and in_typedef:
                if typedef_last:
                    names.add(typedef_last)
                in_typedef = False
            elif tok.type in ("LBRACE", "LPAR"):
                pending_decl = False
            elif (tok.type == "LESSTHAN" and prev is not None and prev.type == "IDENTIFIER"
                  and prev.value in GENERIC_CALLEES):
                tok.type = "GENERIC_LT"
            prev = tok
            yield tok


@functools.lru_cache(maxsize=1)
def _lark() -> lark.Lark:
    grammar = (Path(__file__).parent / "p4.lark").read_text()
    return lark.Lark(grammar, parser="lalr", lexer="contextual", postlex=_TypeNamePostLex(),
                     propagate_positions=True, maybe_placeholders=True, cache=True)


def parse(pre: Preprocessed) -> A.ProgramA:
    """Parse preprocessed text into the AST; syntax errors become located `P4Error`s."""
    try:
        tree = _lark().parse(pre.text)
    except _Refused as e:
        raise unsupported(pre.loc(e.token.line or 0, e.token.column or 0), e.what) from None
    except UnexpectedInput as e:
        raise _syntax_error(pre, e) from None
    try:
        return _MetaBuilder(pre).transform(tree)
    except VisitError as e:
        if isinstance(e.orig_exc, P4Error | RecursionError):
            raise e.orig_exc from None
        raise


_TOKEN_WORDS = {"$END": "end of file"}


def _syntax_error(pre: Preprocessed, e: UnexpectedInput) -> P4Error:
    if isinstance(e, UnexpectedEOF):
        loc = pre.loc(len(pre.line_map), 1)
        return P4Error(loc, "syntax error: unexpected end of file")
    if isinstance(e, UnexpectedToken):
        tok = e.token
        if tok.type == "$END":
            last = len(pre.line_map)
            return P4Error(pre.loc(last, 1), "syntax error: unexpected end of file")
        loc = pre.loc(tok.line, tok.column)
        if tok.type == "IDENTIFIER" and "TYPE_IDENTIFIER" in e.expected and "IDENTIFIER" not in e.expected:
            return P4Error(loc, f"undeclared type '{tok.value}'")
        undeclared = _undeclared_type_before(pre, tok)
        if undeclared is not None:
            return undeclared
        if tok.type == "VARBIT":
            return unsupported(loc, "varbit")
        expected = sorted(_pretty(x) for x in e.expected if not x.startswith("__"))
        hint = f" (expected {', '.join(expected[:6])}{', ...' if len(expected) > 6 else ''})" if expected else ""
        return P4Error(loc, f"syntax error: unexpected '{tok.value}'{hint}")
    if isinstance(e, UnexpectedCharacters):
        loc = pre.loc(e.line, e.column)
        return P4Error(loc, f"syntax error: unexpected character '{e.char}'")
    return P4Error(pre.loc(getattr(e, "line", 0) or 0, getattr(e, "column", 0) or 0), "syntax error")


_KEYWORDS = frozenset({
    "action", "actions", "apply", "bit", "bool", "const", "control", "default", "else", "entries", "enum",
    "error", "exit", "false", "header", "header_union", "if", "in", "inout", "int", "key", "match_kind", "out",
    "parser", "return", "select", "state", "string", "struct", "switch", "table", "transition", "true", "for",
    "tuple", "type", "typedef", "value_set", "varbit", "void",
})


def _undeclared_type_before(pre: Preprocessed, tok: Token) -> P4Error | None:
    """`foo_t x;` with foo_t unknown parses as two names in a row: report the unknown type instead."""
    if tok.type != "IDENTIFIER" or tok.start_pos is None:
        return None
    m = re.search(r"([A-Za-z_]\w*)\s*$", pre.text[:tok.start_pos])
    if m is None or m.group(1) in _KEYWORDS:
        return None
    before = pre.text[:m.start(1)]
    line = before.count("\n") + 1
    col = m.start(1) - (before.rfind("\n") + 1) + 1
    return P4Error(pre.loc(line, col), f"undeclared type '{m.group(1)}'")


_PRETTY = {
    "SEMICOLON": "';'", "LPAR": "'('", "RPAR": "')'", "LBRACE": "'{'", "RBRACE": "'}'", "COLON": "':'",
    "COMMA": "','", "EQUAL": "'='", "IDENTIFIER": "a name", "TYPE_IDENTIFIER": "a type name",
    "INTEGER": "an integer", "LSQB": "'['", "RSQB": "']'", "DOT": "'.'", "MORETHAN": "'>'",
    "LESSTHAN": "'<'",
}


def _pretty(terminal: str) -> str:
    if terminal in _PRETTY:
        return _PRETTY[terminal]
    if (terminal.isupper() and terminal.isalpha()) or ("_" in terminal and terminal.replace("_", "").isupper()):
        return f"'{terminal.lower()}'"
    return terminal


# ---- literals -------------------------------------------------------------------------------------------

_INT = re.compile(r"(?:(\d+)([ws]))?(.*)", re.S)


def parse_int_literal(text: str) -> tuple[int, int | None, bool]:
    """`8w0xFF` → (255, 8, False); `-`-less; underscores allowed; (value, width or None, signed)."""
    m = _INT.fullmatch(text)
    assert m is not None
    width = int(m.group(1)) if m.group(1) else None
    signed = m.group(2) == "s"
    body = m.group(3).replace("_", "")
    low = body.lower()
    if low.startswith("0x"):
        value = int(body[2:], 16)
    elif low.startswith("0b"):
        value = int(body[2:], 2)
    elif low.startswith("0o"):
        value = int(body[2:], 8)
    elif low.startswith("0d"):
        value = int(body[2:], 10)
    else:
        value = int(body, 10)
    return value, width, signed


def _split_top_level(body: str) -> list[str]:
    """Comma-separated parts of an annotation body, ignoring commas inside strings and parentheses."""
    parts: list[str] = []
    depth, start, in_str, i = 0, 0, False, 0
    while i < len(body):
        c = body[i]
        if in_str:
            if c == "\\":
                i += 1
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(body[start:i].strip())
            start = i + 1
        i += 1
    last = body[start:].strip()
    if last or parts:
        parts.append(last)
    return parts


def _annotation_value(text: str) -> str | int | bool:
    """A string literal's text, an integer, true/false, or else the raw text (`k=v`, expressions)."""
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        return _unquote(text)
    if text in ("true", "false"):
        return text == "true"
    neg = text.startswith("-")
    digits = text[1:].strip() if neg else text
    if re.fullmatch(r"(\d+[ws])?(0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|0[dD][0-9_]+|\d[\d_]*)", digits):
        value = parse_int_literal(digits)[0]
        return -value if neg else value
    return text


def _unquote(s: str) -> str:
    body = s[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


# ---- the tree → AST transformer -------------------------------------------------------------------------

class _Builder(Transformer):
    """Builds `ast` nodes; every node gets the original location of its first token."""

    def __init__(self, pre: Preprocessed) -> None:
        super().__init__()
        self.pre = pre

    def _loc(self, meta) -> SourceLoc:
        if getattr(meta, "empty", True):
            return SourceLoc(self.pre.line_map[0][0] if self.pre.line_map else "<empty>", 0, 0)
        return self.pre.loc(meta.line, meta.column)

    def _tloc(self, tok: Token) -> SourceLoc:
        return self.pre.loc(tok.line or 0, tok.column or 0)

    # -- top level
    def start(self, meta, ch):
        return A.ProgramA(tuple(c for c in ch if c is not None))

    def empty_decl(self, meta, ch):
        return None

    # -- annotations
    def annotations(self, meta, ch):
        return tuple(ch)

    def annotation(self, meta, ch):
        tok = ch[0]
        name, _, rest = tok.value[1:].partition("(")
        name = name.strip()
        if not _:
            return Annotation(name, (), "", self._tloc(tok))
        body = rest[:-1].strip()
        return Annotation(name, tuple(_annotation_value(v) for v in _split_top_level(body)), body, self._tloc(tok))

    # -- names and types
    def name(self, meta, ch):
        return ch[0]  # the Token (value + position)

    nt_name = name

    def type_ref(self, meta, ch):
        return ch[0]

    def bool_type(self, meta, ch):
        return A.BaseTypeRef("bool", None, self._loc(meta))

    def error_type(self, meta, ch):
        return A.BaseTypeRef("error", None, self._loc(meta))

    def string_type(self, meta, ch):
        return A.BaseTypeRef("string", None, self._loc(meta))

    def void_type(self, meta, ch):
        return A.BaseTypeRef("void", None, self._loc(meta))

    def match_kind_type(self, meta, ch):
        return A.BaseTypeRef("match_kind", None, self._loc(meta))

    def bit1_type(self, meta, ch):
        return A.BaseTypeRef("bit", A.IntLit(1, None, False, "1", self._loc(meta)), self._loc(meta))

    def int_type(self, meta, ch):
        return A.BaseTypeRef("int", None, self._loc(meta))

    def bit_type(self, meta, ch):
        return A.BaseTypeRef("bit", ch[1], self._loc(meta))

    def signed_type(self, meta, ch):
        return A.BaseTypeRef("signed", ch[1], self._loc(meta))

    def varbit_type(self, meta, ch):
        return A.BaseTypeRef("varbit", ch[1], self._loc(meta))

    def width_int(self, meta, ch):
        return self.int_lit(meta, ch)

    def width_expr(self, meta, ch):
        return ch[0]

    def width_name(self, meta, ch):
        return A.Name(ch[0].value, self._tloc(ch[0]))

    def named_type(self, meta, ch):
        return A.TypeName(ch[0].value, (), self._tloc(ch[0]))

    def generic_type(self, meta, ch):
        return A.TypeName(ch[0].value, ch[1], self._tloc(ch[0]))

    def stack_type(self, meta, ch):
        return A.StackTypeRef(ch[0], ch[1], self._loc(meta))

    def tuple_type(self, meta, ch):
        return A.TupleTypeRef(ch[1], self._loc(meta))

    def type_args(self, meta, ch):
        return tuple(ch)

    # -- type declarations
    def const_decl(self, meta, ch):
        annots, _kw, t, name, value = ch
        return A.ConstDeclA(annots, t, name.value, value, self._loc(meta))

    def typedef_decl(self, meta, ch):
        annots, _kw, t, name = ch
        return A.TypedefA(annots, t, name.value, self._loc(meta))

    def _struct_like(self, kind, meta, ch):
        annots, _kw, name, *fields = ch
        return A.StructLikeA(kind, annots, name.value, tuple(fields), self._tloc(name))

    def header_decl(self, meta, ch):
        return self._struct_like("header", meta, ch)

    def header_union_decl(self, meta, ch):
        return self._struct_like("header_union", meta, ch)

    def struct_decl(self, meta, ch):
        return self._struct_like("struct", meta, ch)

    def struct_field(self, meta, ch):
        annots, t, name = ch
        return A.FieldA(annots, t, name.value, self._tloc(name))

    def enum_decl(self, meta, ch):
        annots, _kw, name, *members = ch
        return A.EnumA(annots, name.value, tuple((m.value, None, self._tloc(m)) for m in members if m is not None),
                       None, self._tloc(name))

    def ser_enum_decl(self, meta, ch):
        annots, _kw, _bit, width, name, *members = ch
        return A.EnumA(annots, name.value, tuple(m for m in members if m is not None), width, self._tloc(name))

    def enum_member(self, meta, ch):
        return (ch[0].value, ch[1], self._tloc(ch[0]))

    def error_decl(self, meta, ch):
        return A.ErrorA(tuple((t.value, self._tloc(t)) for t in ch[2:] if t is not None), self._loc(meta))

    def match_kind_decl(self, meta, ch):
        return A.MatchKindA(tuple((t.value, self._tloc(t)) for t in ch[2:] if t is not None), self._loc(meta))

    # -- params and args
    def params(self, meta, ch):
        return tuple(c for c in ch if c is not None)

    def param(self, meta, ch):
        annots, direction, t, name = ch
        return A.ParamA(annots, direction, t, name.value, self._tloc(name))

    def direction(self, meta, ch):
        return ch[0].value if ch and ch[0] is not None else ""

    def args(self, meta, ch):
        return tuple(c for c in ch if c is not None)

    def named_arg(self, meta, ch):
        return A.NamedArg(ch[0].value, ch[1], self._tloc(ch[0]))

    def dontcare_arg(self, meta, ch):
        return A.DontCare(self._tloc(ch[0]))

    # -- actions, functions, instantiations
    def action_decl(self, meta, ch):
        annots, _kw, name, params, body = ch
        return A.ActionA(annots, name.value, params, body, self._tloc(name))

    def function_decl(self, meta, ch):
        annots, rtype, name, params, body = ch
        return A.FunctionA(annots, rtype, name.value, params, body, self._tloc(name))

    def instantiation(self, meta, ch):
        annots, t, args, name = ch
        return A.InstantiationA(annots, t, args, name.value, self._tloc(name))

    def value_set_decl(self, meta, ch):
        annots, _kw, t, size, name = ch
        return A.ValueSetA(annots, t, size, name.value, self._tloc(name))

    # -- parsers
    def parser_decl(self, meta, ch):
        annots, _kw, name, params, *rest = ch
        locals_ = tuple(r for r in rest if not isinstance(r, A.StateA))
        states = tuple(r for r in rest if isinstance(r, A.StateA))
        return A.ParserA(annots, name.value, params, locals_, states, self._tloc(name))

    def parser_state(self, meta, ch):
        annots, _kw, name, *stmts, transition = ch
        stmts = tuple(s for s in stmts if not isinstance(s, A.EmptyStmt))
        return A.StateA(annots, name.value, stmts, transition, self._tloc(name))

    def goto(self, meta, ch):
        return A.GotoA(ch[1].value, self._tloc(ch[1]))

    def select_transition(self, meta, ch):
        return ch[1]

    def select_expr(self, meta, ch):
        _kw, keys, *cases = ch
        return A.SelectA(keys, tuple(cases), self._tloc(_kw))

    def select_case(self, meta, ch):
        return A.SelectCaseA(ch[0], ch[1].value, self._loc(meta))

    def tuple_keyset(self, meta, ch):
        return A.KsTuple(tuple(ch), self._loc(meta))

    def ks_exact(self, meta, ch):
        return A.KsExact(ch[0], self._loc(meta))

    def ks_mask(self, meta, ch):
        return A.KsMask(ch[0], ch[2], self._loc(meta))

    def ks_range(self, meta, ch):
        return A.KsRange(ch[0], ch[2], self._loc(meta))

    def ks_default(self, meta, ch):
        return A.KsDefault(self._loc(meta))

    def expression_list(self, meta, ch):
        return tuple(c for c in ch if c is not None)

    # -- controls and tables
    def control_decl(self, meta, ch):
        annots, _kw, name, params, *rest = ch
        ctor: tuple[A.ParamA, ...] = ()
        if rest and isinstance(rest[0], _CtorParams):
            ctor = rest[0].params
            rest = rest[1:]
        apply_block = rest[-1]
        locals_ = tuple(r for r in rest[:-2])
        return A.ControlA(annots, name.value, params, locals_, apply_block, self._tloc(name), ctor)

    def ctor_params(self, meta, ch):
        return _CtorParams(ch[0])

    def table_decl(self, meta, ch):
        annots, _kw, name, *props = ch
        return A.TableA(annots, name.value, tuple(props), self._tloc(name))

    def key_property(self, meta, ch):
        annots, _kw, *elements = ch
        return A.KeyPropA(annots, tuple(elements), self._tloc(_kw))

    def actions_property(self, meta, ch):
        annots, _kw, *refs = ch
        return A.ActionsPropA(annots, tuple(refs), self._tloc(_kw))

    def entries_property(self, meta, ch):
        annots, const, kw, *entries = ch
        return A.EntriesPropA(annots, const is not None, tuple(entries), self._tloc(kw))

    def simple_property(self, meta, ch):
        annots, const, name, value = ch
        return A.SimplePropA(annots, const is not None, name.value, value, self._tloc(name))

    def key_element(self, meta, ch):
        expr, kind, annots = ch
        return A.KeyElementA(expr, kind.value, annots, self._loc(meta))

    def action_ref(self, meta, ch):
        annots, name, *rest = ch
        return A.ActionRefA(annots, name.value, rest[0] if rest else None, self._tloc(name))

    def entry(self, meta, ch):
        keyset, action, annots = ch
        return A.EntryA(keyset, action, annots, self._loc(meta))

    # -- statements
    def block(self, meta, ch):
        return A.BlockStmt(tuple(c for c in ch if not isinstance(c, A.EmptyStmt)), self._loc(meta))

    def exit_stmt(self, meta, ch):
        return A.ExitStmt(self._loc(meta))

    def return_stmt(self, meta, ch):
        return A.ReturnStmt(ch[1], self._loc(meta))

    def empty_stmt(self, meta, ch):
        return A.EmptyStmt(self._loc(meta))

    def var_decl(self, meta, ch):
        annots, t, name, init = ch
        return A.VarDeclA(annots, t, name.value, init, self._tloc(name) if not annots else self._loc(meta))

    def for_stmt(self, meta, ch):
        _kw, init, cond, updates, body = ch
        return A.ForStmt(init or (), cond, updates or (), body, self._loc(meta))

    def for_in_stmt(self, meta, ch):
        _kw, t, name, _in, low, _range, high, body = ch
        return A.ForInStmt(t, name.value, low, high, body, self._loc(meta))

    def for_init(self, meta, ch):
        return tuple(ch)

    def for_init_decl(self, meta, ch):
        t, name, value = ch
        return A.VarDeclA((), t, name.value, value, self._tloc(name))

    def for_init_assign(self, meta, ch):
        return A.AssignStmt(ch[0], ch[1], self._loc(meta))

    def for_updates(self, meta, ch):
        return tuple(ch)

    def for_update(self, meta, ch):
        return A.AssignStmt(ch[0], ch[1], self._loc(meta))

    def assignment(self, meta, ch):
        return A.AssignStmt(ch[0], ch[1], self._loc(meta))

    def call_stmt(self, meta, ch):
        loc = self._loc(meta)
        return A.CallStmt(A.CallExpr(ch[0], (), ch[1], loc), loc)

    def generic_call_stmt(self, meta, ch):
        loc = self._loc(meta)
        return A.CallStmt(A.CallExpr(ch[0], ch[2], ch[3], loc), loc)

    def if_stmt(self, meta, ch):
        _kw, cond, then, _else, else_ = ch
        return A.IfStmt(cond, then, else_, self._loc(meta))

    def switch_stmt(self, meta, ch):
        _kw, expr, *cases = ch
        return A.SwitchStmt(expr, tuple(cases), self._loc(meta))

    def switch_case(self, meta, ch):
        return A.SwitchCaseA(ch[0], ch[1], self._loc(meta))

    def label_name(self, meta, ch):
        return A.Name(ch[0].value, self._tloc(ch[0]))

    def label_default(self, meta, ch):
        return None

    def label_int(self, meta, ch):
        return self.int_lit(meta, ch)

    def label_member(self, meta, ch):
        return A.TypeMember(ch[0].value, ch[1].value, self._tloc(ch[0]))

    def lv_name(self, meta, ch):
        return A.Name(ch[0].value, self._tloc(ch[0]))

    def lv_member(self, meta, ch):
        return A.MemberExpr(ch[0], ch[1].value, self._loc(meta))

    def lv_index(self, meta, ch):
        return A.IndexExpr(ch[0], ch[1], self._loc(meta))

    def lv_slice(self, meta, ch):
        return A.SliceExpr(ch[0], ch[1], ch[2], self._loc(meta))

    # -- expressions
    def mux(self, meta, ch):
        return A.MuxExpr(ch[0], ch[1], ch[2], self._loc(meta))

    def cast(self, meta, ch):
        return A.CastExpr(ch[0], ch[1], self._loc(meta))

    def member(self, meta, ch):
        return A.MemberExpr(ch[0], ch[1].value, self._loc(meta))

    def index(self, meta, ch):
        return A.IndexExpr(ch[0], ch[1], self._loc(meta))

    def slice(self, meta, ch):
        return A.SliceExpr(ch[0], ch[1], ch[2], self._loc(meta))

    def call(self, meta, ch):
        return A.CallExpr(ch[0], (), ch[1], self._loc(meta))

    def generic_call(self, meta, ch):
        return A.CallExpr(ch[0], ch[2], ch[3], self._loc(meta))

    def int_lit(self, meta, ch):
        tok = ch[0]
        value, width, signed = parse_int_literal(tok.value)
        return A.IntLit(value, width, signed, tok.value, self._tloc(tok))

    def true_lit(self, meta, ch):
        return A.BoolLit(True, self._loc(meta))

    def false_lit(self, meta, ch):
        return A.BoolLit(False, self._loc(meta))

    def string_lit(self, meta, ch):
        return A.StrLit(_unquote(ch[0].value), self._loc(meta))

    def path(self, meta, ch):
        return A.Name(ch[0].value, self._tloc(ch[0]))

    def type_member(self, meta, ch):
        return A.TypeMember(ch[0].value, ch[1].value, self._tloc(ch[0]))

    def error_member(self, meta, ch):
        return A.TypeMember("error", ch[1].value, self._tloc(ch[0]))

    def constructor_call(self, meta, ch):
        return A.ConstructorCall(ch[0], ch[1], self._loc(meta))

    def list_expr(self, meta, ch):
        return A.ListLit(ch[0], self._loc(meta))

    def struct_expr(self, meta, ch):
        return A.StructLit(tuple(ch), self._loc(meta))

    def kv_pair(self, meta, ch):
        return (ch[0].value, ch[1])

    def un_not(self, meta, ch):
        return A.Unary("!", ch[0], self._loc(meta))

    def un_inv(self, meta, ch):
        return A.Unary("~", ch[0], self._loc(meta))

    def un_neg(self, meta, ch):
        return A.Unary("-", ch[0], self._loc(meta))

    def un_plus(self, meta, ch):
        return ch[0]


_BINOPS = {
    "bin_or": "||", "bin_and": "&&", "bin_eq": "==", "bin_ne": "!=", "bin_lt": "<", "bin_gt": ">",
    "bin_le": "<=", "bin_ge": ">=", "bin_bor": "|", "bin_bxor": "^", "bin_band": "&", "bin_shl": "<<",
    "bin_shr": ">>", "bin_add": "+", "bin_sub": "-", "bin_sadd": "|+|", "bin_ssub": "|-|", "bin_concat": "++",
    "bin_mul": "*", "bin_div": "/", "bin_mod": "%",
}


def _make_binop(op: str):
    def method(self, meta, ch):
        left, right = ch[0], ch[-1]
        return A.Binary(op, left, right, self._loc(meta))
    return method


for _rule, _op in _BINOPS.items():
    setattr(_Builder, _rule, _make_binop(_op))
_MetaBuilder = v_args(meta=True)(_Builder)  # every method gets (meta, children)
