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


@pytest.mark.slow  # the Keras engines' checks are all slow (SLOW_BACKENDS): that tier has them
def test_every_check_of_a_keras_engine_shares_its_worker_group(request):
    """Every selected conformance test of a backend whose checks run in its own child pytest
    (a Keras engine: ``engine_process``) carries that backend's group (``backend_params``): one
    left out lands on any worker and starts a second child pytest over all of that backend's
    checks (hundreds of seconds)."""
    from tests.conformance import engine_process

    stray, seen = [], 0
    for item in request.session.items:
        found = engine_process.engine_of(item)
        if "conformance" not in item.nodeid.split("::")[0] or found is None:
            continue
        seen += 1
        groups = [m.args[0] for m in item.iter_markers("xdist_group")]
        if groups != [f"conformance-{found[0]}"]:
            stray.append(f"{item.nodeid}: {groups}")
    assert not stray, "\n".join(stray[:5])
    if not seen:
        pytest.skip("no Keras engine's conformance check selected")
