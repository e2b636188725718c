"""The impairer lab's gate for a test: skip where this machine cannot host it, fail where
the lab is required (PROMPTPATH_REQUIRE_LAB=1, as CI sets)."""

from __future__ import annotations

import pytest

from tests.conftest import lab_required
from tests.helpers.impairer import LabUnavailable, check_available


def require_impairer() -> None:
    """Return when the impairer lab can run here; else skip, or fail when it is required."""
    try:
        check_available()
    except LabUnavailable as exc:
        if lab_required():
            pytest.fail(f"PROMPTPATH_REQUIRE_LAB=1 but the impairer lab cannot run: {exc}")
        pytest.skip(f"impairer lab unavailable: {exc}")
