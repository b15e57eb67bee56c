"""Parser lowering: one Python function per parser state, each returning its successor's call; `select`
keysets become conditions; `lookahead` and `advance` are closures over the frame's special slots.
"""

from __future__ import annotations

from collections.abc import Callable

from softswitch.frontend import ir
from softswitch.runtime.lower.common import CompilerState, LoweringError, ParserError, pattern_code


class ParserCodegen(CompilerState):
    """Parser lowering: one Python function per parser state, each returning its successor's call; `select`"""

    def keyset_cond(self, key: str, key_t: ir.Type, ks: ir.Keyset) -> str:
        if isinstance(ks, ir.KeysetDefault):
            return "True"
        if isinstance(ks, ir.KeysetExact):
            return f"{key} == {self.ex(ks.value)}"
        if isinstance(ks, ir.KeysetMask):
            m = self.ex(ks.mask)
            return f"({key} & {m}) == ({self.ex(ks.value)} & {m})"
        if isinstance(ks, ir.KeysetRange):
            return f"{self.ex(ks.low)} <= {key} <= {self.ex(ks.high)}"
        if isinstance(ks, ir.KeysetValueSet):
            vs = self.instance_name(ks.value_set, ks.loc)
            return f"{vs}.contains({key})"
        raise LoweringError(None, f"keyset {type(ks).__name__}")

    def compile_parser(self, p: ir.Parser) -> None:
        self.function_kind = "parser"
        self.stage = p.name
        state_fn = {s.name: f"ps_{self.fresh('')}_{s.name}" for s in p.states}
        for s in p.states:
            self.out(f"def {state_fn[s.name]}(F):")
            self.out.indent()
            self.block(s.body)
            tr = s.transition
            if isinstance(tr, ir.Goto):
                self.out(f"return {self._next(tr.state, state_fn, tr.loc)}")
            else:
                keys = []
                for k in tr.keys:
                    v = self.fresh("_k")
                    self.out(f"{v} = {pattern_code(self.ex(k), k.type) if isinstance(k.type, ir.BoolType) else self.ex(k)}")
                    keys.append((v, k.type))
                for case in tr.cases:
                    if len(case.keysets) == 1 and isinstance(case.keysets[0], ir.KeysetDefault):
                        cond = "True"
                    elif len(case.keysets) == 1 and len(keys) > 1 and isinstance(case.keysets[0], ir.KeysetValueSet):
                        raise LoweringError(case.loc, "a value_set over several select keys is not supported")
                    else:
                        conds = [self.keyset_cond(k, kt, ks) for (k, kt), ks in zip(keys, case.keysets, strict=True)]
                        conds = [c for c in conds if c != "True"] or ["True"]
                        cond = " and ".join(conds)
                    if cond == "True":
                        self.out(f"return {self._next(case.next_state, state_fn, case.loc)}")
                        break
                    self.out(f"if {cond}:")
                    self.out(f"    return {self._next(case.next_state, state_fn, case.loc)}")
                else:
                    # no case matched and no default: BMv2 goes on as if the parser had accepted
                    self.out("return None")

            self.out.dedent()
            self.out("")
        locals_init = []
        for d in p.locals:
            self.scope[d.name] = self.alloc.allocate(d.type, f"{p.name}.{d.name}")
            locals_init.append(d)
        self.out("def parse(F):")
        self.out.indent()
        for d in locals_init:
            self.declare(d, self.scope, False)
        # states call their successor directly; a parser loop that never ends hits Python's recursion
        # limit, which the switch turns into a dropped packet
        self.out(f"{state_fn['start']}(F)")
        self.out.dedent()
        self.out("")

    def _next(self, state: str, state_fn: dict[str, str], loc: ir.SourceLoc | None) -> str:
        """Code that continues parsing at `state` (the value returned by the current state function)."""
        if state in ("accept", "reject"):
            # BMv2 (p4c warns "explicit transition to reject not supported"): both end parsing, no error
            return "None"
        if state not in state_fn:
            raise LoweringError(loc, f"parser state {state} does not exist")
        return f"{state_fn[state]}(F)"

    def _make_lookahead(self) -> Callable[[list, int], int]:
        sp = self.special
        too_short = self.err.get("PacketTooShort", 1)
        data_i, pos_i, dlen_i = sp["DATA"], sp["POS"], sp["DLEN"]

        def lookahead(F: list, width: int) -> int:
            nbytes = (width + 7) // 8
            p = F[pos_i]
            if p + nbytes > F[dlen_i]:
                raise ParserError(too_short)
            return int.from_bytes(F[data_i][p:p + nbytes], "big") >> (nbytes * 8 - width)

        return lookahead

    def _make_advance(self) -> Callable[[list, int], None]:
        sp = self.special
        too_short = self.err.get("PacketTooShort", 1)
        pos_i, dlen_i = sp["POS"], sp["DLEN"]

        def advance(F: list, nbits: int) -> None:
            p = F[pos_i] + nbits // 8
            if p > F[dlen_i]:
                raise ParserError(too_short)
            F[pos_i] = p

        return advance
