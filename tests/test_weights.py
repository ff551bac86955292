"""Canonical weights: deterministic from (workload, seed), saved and loaded by canonical name."""

from __future__ import annotations

import numpy as np
import pytest

from rosetta.errors import RosettaError
from rosetta.spec import canonical_weights, get_workload, load_weights, save_weights
from rosetta.spec.init import make_init, sample


@pytest.fixture(scope="module")
def cnn():
    return get_workload("cnn")


def test_same_seed_same_numbers_other_seed_other_numbers(cnn):
    a, b, c = canonical_weights(cnn, 0), canonical_weights(cnn, 0), canonical_weights(cnn, 1)
    assert list(a) == [p.name for p in cnn.param_specs]
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])
        assert a[name].dtype == np.float32
    assert not np.array_equal(a["conv1.kernel"], c["conv1.kernel"])


def test_each_tensor_has_its_own_stream(cnn):
    # the draw for a name does not depend on the other layers: conv1.kernel of the cnn equals a
    # direct draw with the same (seed, name) generator
    import zlib

    spec = next(p for p in cnn.param_specs if p.name == "conv1.kernel")
    rng = np.random.default_rng([0, zlib.crc32(b"conv1.kernel")])
    direct = sample(spec.init, spec.shape, spec.fan_in, spec.fan_out, rng).astype(np.float32)
    np.testing.assert_array_equal(canonical_weights(cnn, 0)["conv1.kernel"], direct)


def test_initialiser_statistics():
    rng = np.random.default_rng(0)
    # glorot uniform on a (450 fan_in, 450 fan_out) conv: bound sqrt(6/900)
    w = sample(make_init("glorot_uniform"), (50, 50, 3, 3), 450, 450, rng)
    limit = np.sqrt(6 / 900)
    assert np.abs(w).max() <= limit and np.abs(w).max() > 0.95 * limit
    # he normal fan_out: std sqrt(2 / fan_out); 22,500 draws give std within 2%
    w = sample(make_init("he_normal", mode="fan_out"), (50, 50, 3, 3), 450, 450, rng)
    assert w.std() == pytest.approx(np.sqrt(2 / 450), rel=0.02)
    # orthogonal (H, 3H): orthonormal rows
    q = sample(make_init("orthogonal"), (100, 300), 100, 300, rng)
    np.testing.assert_allclose(q @ q.T, np.eye(100), atol=1e-12)
    with pytest.raises(ValueError, match="unknown initialiser"):
        make_init("xavier")
    with pytest.raises(ValueError, match="takes"):
        make_init("zeros", value=1.0)


def test_save_load_roundtrip_without_pickle(tmp_path, cnn):
    params = canonical_weights(cnn, 3)
    path = save_weights(tmp_path / "cnn.npz", cnn, params, seed=3)
    loaded = load_weights(path, cnn)
    assert set(loaded) == set(params)
    for name in params:
        np.testing.assert_array_equal(loaded[name], params[name])
    with np.load(path, allow_pickle=False) as data:  # plain arrays only
        assert "__meta__" in data.files


def test_load_rejects_wrong_workload_shapes_and_garbage(tmp_path, cnn):
    gru = get_workload("gru")
    save_weights(tmp_path / "gru.npz", gru, canonical_weights(gru, 0))
    with pytest.raises(RosettaError, match="workload 'gru', not 'cnn'"):
        load_weights(tmp_path / "gru.npz", cnn)
    params = canonical_weights(cnn, 0)
    params["fc2.bias"] = np.zeros(11, np.float32)
    with pytest.raises(RosettaError, match=r"fc2.bias has shape \(11,\), expected \(10,\)"):
        save_weights(tmp_path / "bad.npz", cnn, params)
    del params["fc2.bias"]
    with pytest.raises(RosettaError, match="missing \\['fc2.bias'\\]"):
        save_weights(tmp_path / "bad.npz", cnn, params)
    (tmp_path / "junk.npz").write_bytes(b"not a zip file")
    with pytest.raises(RosettaError, match="junk.npz: not a readable weights .npz"):
        load_weights(tmp_path / "junk.npz", cnn)
    with pytest.raises(RosettaError, match="not found"):
        load_weights(tmp_path / "absent.npz", cnn)
