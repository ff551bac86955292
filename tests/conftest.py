"""Fixtures shared by the runner and bench tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def small_data(tmp_path_factory):
    """Synthetic IMDB and CIFAR-10 big enough for the ci profiles (256 train / 128 test)."""
    from rosetta import datasets

    d = tmp_path_factory.mktemp("data")
    datasets.write_synthetic_imdb(d, n_train=600, n_test=300)
    datasets.write_synthetic_cifar10(d, n_train=600, n_test=300)
    return d
