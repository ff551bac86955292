"""The test tiers' own machinery does what ``scripts/test.sh`` relies on."""

from __future__ import annotations

import pytest


@pytest.mark.xdist_group("tiers")
def test_a_grouped_test_runs_in_its_group_under_loadgroup(request):
    """Under ``--dist loadgroup`` (scripts/test.sh) xdist sends a group to one worker by a suffix
    of the test's node id; where the suffix does not take (pytest 9 with pytest-xdist 3.8), every
    backend's conformance checks are spread over the workers and build each model twice."""
    if not request.config.getoption("loadgroup", default=False):
        pytest.skip("not run under pytest-xdist --dist loadgroup")
    assert request.node.nodeid.endswith("@tiers"), request.node.nodeid
