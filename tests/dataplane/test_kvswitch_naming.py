"""docs/naming.md is the controller's contract: every name it gives exists in the program, every object the
control plane can touch is in it, and its code tables give the program's values."""

from __future__ import annotations

import pathlib
import re

import pytest

NAMING = pathlib.Path(__file__).resolve().parents[2] / "docs" / "naming.md"


@pytest.fixture(scope="module")
def doc() -> str:
    return NAMING.read_text(encoding="utf-8")


def _documented_names(doc: str) -> set[str]:
    names = set(re.findall(r"`(My(?:Ingress|Egress)\.[a-z0-9_]+)`", doc))
    # "`sketch_count_r0`, `_r1`, `_r2`"
    for stem in re.findall(r"`(MyIngress\.[a-z_]+_r)0`, `_r1`, `_r2`", doc):
        names |= {f"{stem}{i}" for i in range(3)}
    return names


def test_every_documented_name_exists(program, doc: str) -> None:
    known = ({t.qualified_name for t in program.all_tables()}
             | {a.qualified_name for a in program.all_actions()}
             | {i.qualified_name for i in program.all_instances()})
    assert sorted(_documented_names(doc) - known) == []


def test_every_control_plane_object_is_documented(program, doc: str) -> None:
    documented = _documented_names(doc)
    objects = ({t.qualified_name for t in program.all_tables()}
               | {i.qualified_name for i in program.all_instances()}
               | {a.action for t in program.all_tables() for a in t.actions if a.action != "NoAction"})
    assert sorted(objects - documented) == []
    for d in program.digests:
        assert f"`{d.name}`" in doc
        for f in d.type.fields:
            assert f"| `{f.name}` | {f.type.width} |" in doc


@pytest.mark.parametrize("enum", ["punt_reason_t", "drop_reason_t", "kvp_event_t", "port_role_t",
                                  "coalesce_event_t", "stream_event_t"])
def test_code_tables_match_the_program(enums, doc: str, enum: str) -> None:
    after = doc.split(f"\n`{enum}` (", 1)[1]
    table = re.search(r"^\|.*?(?=\n\n|\Z)", after, re.M | re.S).group(0)
    rows = {name: int(value) for value, name in re.findall(r"^\| (\d+) \| `([A-Z0-9_]+)` \|", table, re.M)}
    assert rows == enums[enum]
