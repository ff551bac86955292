"""The profiles do what they promise (the slow tier's): ``smoke`` takes the reference clearly above
chance on the synthetic data. (``ci`` running every installed backend's notebook is
tests/test_new_workload.py's run.)"""

from __future__ import annotations

import pytest

from rosetta.datasets import prepare_data
from rosetta.runner.cell import run_cell
from rosetta.runner.config import CellConfig
from rosetta.spec import get_workload

# Chance is 0.1 (cnn) and 0.5 (gru); the reference measured 0.787 and 0.861 on smoke. These
# margins are what `smoke` must clear for the reference, so that a backend's smoke accuracy near
# chance means the backend, not the profile, is wrong.
SMOKE_MARGIN = {"cnn": (0.1, 0.5), "gru": (0.5, 0.25)}


@pytest.mark.slow
@pytest.mark.parametrize("workload", ["cnn", "gru"])
def test_smoke_profile_takes_the_reference_clearly_above_chance(workload):
    # the embedded default data, as `rosetta bench` prepares it (synthesised in the package's
    # data/ folder once, if absent)
    prepare_data([get_workload(workload).dataset.name], None, say=lambda line: None)
    rec = run_cell(CellConfig("numpy_ref", workload, "smoke"))
    chance, margin = SMOKE_MARGIN[workload]
    assert rec["metrics"]["test_accuracy"] > chance + margin
