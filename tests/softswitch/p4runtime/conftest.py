"""Fixtures for the P4Runtime tests. The doubles live in p4rt_fakes.py; pytest imports test files in
importlib mode (no sys.path changes), so this conftest registers that module under its name for them."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest


def _load_helper(name: str):
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, pathlib.Path(__file__).with_name(f"{name}.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


_fakes = _load_helper("p4rt_fakes")
_net = _load_helper("p4rt_net")


@pytest.fixture
def harness():
    h = _fakes.Harness()
    yield h
    h.close()
