"""A pytest plugin for CI: a test marked with a required target's marker may not skip.

    python -m pytest -p kvtesting.require_targets --require-target bmv2

Without it, a machine that lacks p4c or simple_switch_grpc reports the BMv2 cases as skipped and the run is
green; with it, each such skip is a failure that carries the skip's reason, so CI proves the cases ran.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--require-target", action="append", default=[], metavar="MARKER",
                     help="tests marked MARKER (e.g. bmv2) must run: a skip of one of them fails")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # type: ignore[no-untyped-def]
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    required = item.config.getoption("--require-target")
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    missing = [marker for marker in required if item.get_closest_marker(marker) is not None]
    if missing:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"--require-target {missing[0]}: this test skipped ({reason}); the target must run here"
