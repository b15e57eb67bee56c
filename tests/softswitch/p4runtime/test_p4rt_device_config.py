"""The device-config bundle: self-contained sources, safe unpacking, clear errors for foreign configs."""

from __future__ import annotations

import json

import pytest

from softswitch.p4runtime.device_config import DeviceConfigError, bundle, unbundle


def test_bundle_carries_local_includes_and_restores_them(tmp_path):
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "headers.p4").write_text('#include "consts.p4"\nheader h_t { bit<8> x; }\n')
    (tmp_path / "include" / "consts.p4").write_text("const bit<8> ONE = 1;\n")
    (tmp_path / "prog.p4").write_text('#include <core.p4>\n#include "include/headers.p4"\n')
    doc = json.loads(bundle(tmp_path / "prog.p4"))
    assert sorted(doc["sources"]) == ["include/consts.p4", "include/headers.p4", "prog.p4"]
    main = unbundle(bundle(tmp_path / "prog.p4"), tmp_path / "out")
    assert main == (tmp_path / "out" / "prog.p4").resolve()
    assert (tmp_path / "out" / "include" / "consts.p4").read_text() == "const bit<8> ONE = 1;\n"


def test_bundle_is_byte_identical_across_runs(tmp_path):
    (tmp_path / "p.p4").write_text("// x\n")
    assert bundle(tmp_path / "p.p4") == bundle(tmp_path / "p.p4")


@pytest.mark.parametrize(("data", "message"), [
    (b'{"header_types": [], "pipelines": []}', "bundle"),           # a BMv2 JSON
    (b"\x00\x01garbage", "JSON bundle"),
    (json.dumps({"format": "softswitch-p4-bundle/1", "main": "p.p4",
                 "sources": {"../evil.p4": "x"}}).encode(), "bad source entry"),
    (json.dumps({"format": "softswitch-p4-bundle/1", "main": "q.p4",
                 "sources": {"p.p4": "x"}}).encode(), "'main'"),
])
def test_foreign_or_unsafe_config_is_refused(tmp_path, data, message):
    with pytest.raises(DeviceConfigError, match=message):
        unbundle(data, tmp_path)
    assert not (tmp_path.parent / "evil.p4").exists()
