"""The specs state every detail the architecture's trap list asks for, as data."""

from __future__ import annotations

from rosetta.spec import get_workload, ops, workload_names
from rosetta.spec.graph import walk
from rosetta.spec.workload import SGD, Adam


def test_five_workloads_are_found_by_convention():
    assert workload_names() == ["cnn", "decoder", "gru", "resnet50", "transformer"]


def test_decoder_is_a_gpt_with_a_tied_head():
    """Four pre-LN causal blocks, a final LayerNorm and the head tied to the token table: the
    table is counted once (the count written out by hand from the spec's widths)."""
    w = get_workload("decoder")
    leaves = [type(n).__name__ for n, _, _ in walk(w.graph, w.input.shape)]
    assert leaves.count("CausalAttention") == 4 and "Attention" not in leaves
    assert leaves[-2:] == ["LayerNorm", "TiedDense"]
    head = w.graph[-1]
    assert (head.tie, head.units) == ("embedding", 8192)
    assert w.output_shape == (128, 8192)
    e, f, v, t = 256, 1024, 8192, 128
    block = 2 * 2 * e + (4 * e * e + 3 * e) + (e * f + f) + (f * e + e)  # 2 LNs, attn, MLP
    assert w.num_params == v * e + t * e + 4 * block + 2 * e
    assert "lm_head.kernel" not in {p.name for p in w.param_specs}


def test_cnn_layers_as_in_the_original():
    g = get_workload("cnn").graph
    kinds = [type(n).__name__ for n in g]
    assert kinds == [
        "Conv2D", "ReLU", "Conv2D", "MaxPool2D", "ReLU", "Dropout",
        "Conv2D", "ReLU", "Conv2D", "MaxPool2D", "ReLU", "Dropout",
        "Flatten", "Dense", "ReLU", "Dropout", "Dense",
    ]  # fmt: skip
    convs = [n for n in g if isinstance(n, ops.Conv2D)]
    assert [c.out_channels for c in convs] == [50, 50, 100, 100]
    assert all(
        c.padding == (1, 1, 1, 1) and c.stride == (1, 1) and c.kernel == (3, 3) for c in convs
    )
    assert [n.rate for n in g if isinstance(n, ops.Dropout)] == [0.25, 0.25, 0.5]
    assert all(n.stride == (2, 2) for n in g if isinstance(n, ops.MaxPool2D))
    assert all(c.init["kernel"].dist == "glorot_uniform" for c in convs)


def test_optimisers_and_profiles():
    cnn, gru = get_workload("cnn"), get_workload("gru")
    assert cnn.optimizer == SGD(lr=0.01, momentum=0.9, nesterov=False)
    assert gru.optimizer == Adam(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8)
    full = cnn.profile("full")
    assert (full.batch_size, full.epochs, full.train_samples, full.test_samples) == (
        64,
        10,
        50000,
        10000,
    )
    full = gru.profile("full")
    assert (full.batch_size, full.epochs, full.train_samples, full.test_samples) == (
        64,
        3,
        25000,
        25000,
    )
    full = get_workload("resnet50").profile("full")
    assert (full.batch_size, full.batches, full.warmup_batches) == (32, 40, 1)
    for w in (cnn, gru, get_workload("resnet50")):
        assert set(w.profiles) == {"ci", "smoke", "full"}
        assert set(w.tolerances) == {"float32", "float64", "bf16", "tf32"}
        # float64 bounds are tighter than float32 bounds
        assert w.tolerances["float64"].forward.rtol < w.tolerances["float32"].forward.rtol


def test_gru_conventions_and_imdb_preprocessing_are_explicit():
    w = get_workload("gru")
    gru = w.graph[1]
    assert isinstance(gru, ops.GRU)
    assert gru.gate_order == ("z", "r", "h") and gru.reset_after and gru.output == "last"
    ds = w.dataset
    keys = ("num_words", "maxlen", "start_id", "oov_id", "index_from")
    assert [ds.get(k) for k in keys] == [30000, 150, 1, 2, 3]
    assert ds.get("padding") == "pre"
