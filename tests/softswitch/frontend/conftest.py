"""Fixtures for the front-end tests: programs under p4src/ are loaded once per session."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from softswitch.frontend import ir, load_program


@pytest.fixture(scope="session")
def load_cached() -> Callable[[Path], ir.Program]:
    """`load_program`, memoised by path for the session (the real program takes a while to check)."""
    cache: dict[Path, ir.Program] = {}

    def load(path: Path) -> ir.Program:
        if path not in cache:
            cache[path] = load_program(str(path))
        return cache[path]

    return load
