"""Bring your own model: ``rosetta import`` of ONNX files the tests build themselves.

The corpus is written with ``torch.nn`` here and exported with ``torch.onnx.export`` (no
download): an MLP, the seed's VGG-style CNN, a ResNet-18-style net with projection shortcuts and
BatchNorm, an Inception-style block of four branches joined by a concat. Each is imported, its
float64 reference output compared with PyTorch's own output on the same input, and (slow tier)
gated on every backend. The round trip: a built-in workload through the exporter and back is the
same function with bit-equal weights. And the refusals: each one line, nothing written.

Tolerance of the PyTorch comparison: PyTorch computes in float32 and the reference in float64,
so the difference is float32's summation-order error, which compounds with depth (the built-in
ResNet-50's float32 gate is 1e-3 relative to the largest output); 1e-4 relative suffices for
these shallow nets (measured <= 1e-6) while a wrong layout or a dropped bias moves O(1).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from rosetta import backends
from rosetta.cli import main
from rosetta.errors import RosettaError
from rosetta.spec import canonical_weights, load_workload

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
nn = torch.nn
TORCH_RTOL = 1e-4


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(48, 32), nn.Linear(32, 10)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(torch.flatten(x, 1))))


def vgg():
    """The seed's CNN (rosetta/models/cnn.yaml), narrower."""
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1),
        nn.MaxPool2d(2), nn.ReLU(), nn.Dropout(0.25), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
        nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 8 * 8, 32), nn.ReLU(), nn.Dropout(0.5),
        nn.Linear(32, 10),
    )  # fmt: skip


class Block(nn.Module):
    """ResNet's basic block; a projection shortcut where the shape changes."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.proj = None
        if stride != 1 or cin != cout:
            self.proj = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))  # fmt: skip

    def forward(self, x):
        y = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
        return torch.relu(y + (x if self.proj is None else self.proj(x)))


class ResNet18ish(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8),
                                  nn.ReLU())  # fmt: skip
        self.layers = nn.Sequential(Block(8, 8, 1), Block(8, 16, 2), Block(16, 16, 1))
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class Inceptionish(nn.Module):
    """Four branches of one input, their channels concatenated."""

    def __init__(self):
        super().__init__()
        self.b1 = nn.Conv2d(3, 4, 1)
        self.b3 = nn.Sequential(nn.Conv2d(3, 4, 1), nn.ReLU(), nn.Conv2d(4, 6, 3, padding=1))
        self.b5 = nn.Sequential(nn.Conv2d(3, 2, 1), nn.ReLU(), nn.Conv2d(2, 3, 3, padding=1),
                                nn.ReLU(), nn.Conv2d(3, 3, 3, padding=1))  # fmt: skip
        self.pool = nn.Sequential(nn.MaxPool2d(3, 1, 1), nn.Conv2d(3, 2, 1))
        self.fc = nn.Linear(15, 10)

    def forward(self, x):
        y = torch.cat([self.b1(x), self.b3(x), self.b5(x), self.pool(x)], dim=1)
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(torch.relu(y), 1), 1))


class InvertedResidual(nn.Module):
    """MobileNetV2's block: a 1x1 expansion, a 3x3 depthwise convolution (groups = channels),
    a linear 1x1 projection, each with BatchNorm (folded on export), ReLU6 after the first two;
    the input added back where the shape allows."""

    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        mid = cin * expand
        self.body = nn.Sequential(
            nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU6(),
            nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False), nn.BatchNorm2d(mid),
            nn.ReLU6(), nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout),
        )  # fmt: skip
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class MobileNetV2ish(nn.Module):
    """A MobileNetV2-style net of inverted residuals, with a grouped 1x1 head (groups 4, as
    ShuffleNet's) before the pooled classifier."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8),
                                  nn.ReLU6())  # fmt: skip
        self.blocks = nn.Sequential(InvertedResidual(8, 8, 1, 2), InvertedResidual(8, 12, 2, 3),
                                    InvertedResidual(12, 12, 1, 2))  # fmt: skip
        self.head = nn.Sequential(nn.Conv2d(12, 24, 1, groups=4), nn.ReLU6())
        self.fc = nn.Sequential(nn.Dropout(0.2), nn.Linear(24, 10))

    def forward(self, x):
        x = self.head(self.blocks(self.stem(x)))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class Activations(nn.Module):
    """MobileNetV2/V3's and EfficientNet's activations: ReLU6 (Clip), SiLU (PyTorch exports it
    as Sigmoid then Mul: a gate, a wired graph), hard-swish, tanh."""

    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(4, 4, 1)
        self.fc = nn.Linear(4 * 8 * 8, 10)
        with torch.no_grad():  # pre-activations spanning ReLU6's and hard-swish's kinks
            self.c1.weight.mul_(8)
            self.c2.weight.mul_(4)

    def forward(self, x):
        y = nn.functional.silu(nn.functional.relu6(self.c1(x)))
        y = torch.tanh(nn.functional.hardswish(self.c2(y)))
        return self.fc(torch.flatten(y, 1))


class MeanPooled(nn.Module):
    """Global average pooling written as ``mean((2, 3))`` (ReduceMean), once keeping the unit
    axes and squeezing them (Squeeze), and two heads joined by an add."""

    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(3, 4, 1)
        self.fc = nn.Linear(4, 10)

    def forward(self, x):
        a = torch.relu(self.c1(x)).mean((2, 3))
        b = torch.relu(self.c2(x)).mean((2, 3), keepdim=True).squeeze(3).squeeze(2)
        return self.fc(a + b)


class Softmaxed(nn.Module):
    """A classifier returning probabilities: flatten, ``Linear``, ReLU, ``Linear``, then
    ``nn.Softmax(dim=1)`` (ONNX ``Softmax`` over the last axis, the spec's softmax)."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(48, 16), nn.Linear(16, 10)
        self.softmax = nn.Softmax(dim=1)
        with torch.no_grad():  # logits spread over a few units: probabilities far from uniform
            self.fc2.weight.mul_(8)

    def forward(self, x):
        return self.softmax(self.fc2(torch.relu(self.fc1(torch.flatten(x, 1)))))


def avgpooled():
    """Average pooling both ways: ``nn.AvgPool2d(2)`` (no padding) and a padded 3x3/2 pool that
    divides by each window's real cells (``count_include_pad=False``)."""
    return nn.Sequential(
        nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2), nn.Conv2d(6, 8, 3, padding=1),
        nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False), nn.Flatten(),
        nn.Linear(8 * 4 * 4, 10),
    )  # fmt: skip


class GruClassifier(nn.Module):
    """Token ids -> ``nn.Embedding`` -> ``nn.GRU`` (batch-first) -> its final state -> 2 logits:
    the built-in gru workload's shape, written the PyTorch way (``h[-1]``)."""

    vocab = 40

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(self.vocab, 8)
        self.rnn = nn.GRU(8, 6, batch_first=True)
        self.fc = nn.Linear(6, 2)

    def forward(self, ids):
        _, h = self.rnn(self.emb(ids))  # h: (1, N, 6)
        return self.fc(h[-1])


class LstmClassifier(GruClassifier):
    """The same with ``nn.LSTM``: ``h[-1]`` of its final ``(h, c)``; exported as ONNX's LSTM
    (gate blocks i | o | f | c, two biases: the spec's i | f | g | o and their one sum)."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(8, 6, batch_first=True)

    def forward(self, ids):
        _, (h, _) = self.rnn(self.emb(ids))  # h: (1, N, 6)
        return self.fc(h[-1])


class TransformerClassifier(nn.Module):
    """Token ids -> ``nn.Embedding`` plus learned positions -> a 2-layer ``nn.TransformerEncoder``
    (``norm_first``, GELU, the key padding mask of the ids that are 0, a final LayerNorm) -> the
    mean over the real tokens -> 2 logits: the built-in transformer workload's shape, written
    the PyTorch way. torch.onnx writes each attention as ~90 nodes (a packed (E, 3E) in-projection,
    the scale as two square roots, the mask as Where/Expand) and the GELU as Div/Erf/Add/Mul/Mul:
    regions the importer recognises and checks (``rosetta.importer.patterns``)."""

    vocab = 40

    def __init__(self, width=16, heads=2, length=12):
        super().__init__()
        self.emb = nn.Embedding(self.vocab, width)
        self.pos = nn.Parameter(torch.randn(1, length, width) * 0.1)
        layer = nn.TransformerEncoderLayer(
            width,
            heads,
            dim_feedforward=32,
            dropout=0.1,
            activation="gelu",
            batch_first=True,
            norm_first=True,
        )
        self.enc = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(width),
                                         enable_nested_tensor=False)  # fmt: skip
        for p in self.parameters():  # away from PyTorch's zero biases and unit LayerNorms
            p.data.add_(0.05 * torch.randn_like(p))
        self.fc = nn.Linear(width, 2)

    def forward(self, ids):
        pad = ids == 0  # (N, T): True at padding
        h = self.enc(self.emb(ids) + self.pos, src_key_padding_mask=pad)  # (N, T, E)
        real = (~pad).unsqueeze(-1).to(h.dtype)  # (N, T, 1)
        return self.fc((h * real).sum(1) / real.sum(1).clamp(min=1))


#: name -> (model, per-sample input shape, export keeps BatchNorm nodes)
CORPUS = {
    "mlp": (Mlp, (3, 4, 4), False),
    "vgg": (vgg, (3, 32, 32), False),
    "resnet18ish": (ResNet18ish, (3, 16, 16), True),
    "inceptionish": (Inceptionish, (3, 8, 8), False),
    "mobilenetv2ish": (MobileNetV2ish, (3, 16, 16), False),
    "gru": (GruClassifier, (12,), False),
    "lstm": (LstmClassifier, (12,), False),
    "transformer": (TransformerClassifier, (12,), False),
    "activations": (Activations, (3, 8, 8), False),
    "meanpooled": (MeanPooled, (3, 6, 6), False),
    "softmaxed": (Softmaxed, (3, 4, 4), False),
    "avgpooled": (avgpooled, (3, 16, 16), False),
}


def export(model, shape, path: Path, keep_bn: bool = False, **kw) -> Path:
    """``model`` (eval mode) to ONNX with PyTorch's TorchScript exporter at opset 17."""
    torch.manual_seed(0)
    model.eval()
    vocab = getattr(model, "vocab", None)  # a token model reads ids
    example = torch.randint(0, vocab, (1, *shape)) if vocab else torch.rand(1, *shape)
    for m in model.modules():  # BatchNorm statistics away from 0 and 1: each term shows
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
            m.weight.data.uniform_(0.8, 1.2)
            m.bias.data.uniform_(-0.2, 0.2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model, (example,), str(path), dynamo=False, opset_version=17,
            do_constant_folding=not keep_bn, **kw,
        )  # fmt: skip
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Every corpus model exported and imported: name -> (torch model, workload)."""
    return build_corpus(tmp_path_factory.mktemp("corpus"))


def build_corpus(folder: Path) -> dict:
    """Export every corpus model into ``folder`` and import it into ``folder/models``."""
    models = folder / "models"
    models.mkdir()
    out = {}
    for name, (make_model, shape, keep_bn) in CORPUS.items():
        torch.manual_seed(1)
        model = make_model()
        path = export(model, shape, folder / f"{name}.onnx", keep_bn)
        assert main(["import", str(path), "--models-dir", str(models), "--name", name]) == 0
        out[name] = (model, load_workload(models / f"{name}.yaml"))
    return out


def sample_input(workload, n: int, seed: int) -> np.ndarray:
    """``n`` inputs of ``workload``: images or features in [0, 1), or token ids over its whole
    vocabulary (padding included)."""
    rng = np.random.default_rng(seed)
    if workload.input.dtype == "int32":
        vocab = int(workload.dataset.get("num_words"))
        return rng.integers(0, vocab, (n, *workload.input.shape)).astype(np.int32)
    return rng.random((n, *workload.input.shape), dtype=np.float32)


@pytest.mark.parametrize("name", list(CORPUS))
def test_the_reference_computes_what_pytorch_computes(corpus, name):
    model, workload = corpus[name]
    x = sample_input(workload, 3, 3)
    with torch.no_grad():
        theirs = model(torch.from_numpy(x)).numpy().astype(np.float64)
    ref = backends.make("numpy_ref", workload, canonical_weights(workload, 0, "float64"),
                        dtype="float64")  # fmt: skip
    ours = ref.predict_numpy(x)
    scale = np.abs(ours).max()
    assert np.abs(ours - theirs).max() <= TORCH_RTOL * scale, name
    facts = dict(workload.provenance)
    assert facts["check_max_rel"] <= 1e-3 and facts["producer"] == "pytorch"
    assert (
        facts["sha256"]
        == __import__("hashlib")
        .sha256((workload.source.parent.parent / f"{name}.onnx").read_bytes())
        .hexdigest()
    )


def test_the_corpus_reads_as_specs_do(corpus):
    """Chains stay chains; a branching file is one wired graph whose names are the file's."""
    from rosetta.spec import ops

    assert not any(isinstance(n, ops.Graph) for n in corpus["vgg"][1].graph)
    (graph,) = corpus["inceptionish"][1].graph
    assert isinstance(graph, ops.Graph)
    assert sum(isinstance(n, ops.Concat) for n in graph.nodes) == 1
    names = [p.name for p in corpus["resnet18ish"][1].param_specs]
    assert "layers_1_proj_0.kernel" in names and "layers_1_proj_1.var" in names
    from rosetta.spec.facts import spec_facts

    stated = spec_facts(corpus["resnet18ish"][1], 8, 8, "fp32")["provenance"]  # the record's
    assert stated["file"] == "resnet18ish.onnx" and stated["check_max_rel"] <= 1e-3
    text = corpus["resnet18ish"][1].source.read_text()
    assert "{op: add, inputs: [" in text and "op: batchnorm" in text
    # the encoder's regions became the spec's ops, named by their module scope in the file
    kinds = [type(n).__name__ for n in corpus["transformer"][1].graph[0].nodes]
    assert kinds.count("Attention") == 2 and kinds.count("GELU") == 2
    assert kinds.count("MaskedMean") == 1 and kinds.count("PositionEmbedding") == 1
    names = [p.name for p in corpus["transformer"][1].param_specs]
    assert "enc_layers_1_self_attn.query_kernel" in names and "enc_norm.gamma" in names


def test_check_prints_the_coverage_table_and_writes_nothing(tmp_path, capsys):
    path = export(vgg(), (3, 32, 32), tmp_path / "vgg.onnx")
    assert main(["import", "--check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Conv           3  conv2d" in out and "Gemm           2  dense" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vgg.onnx"]


def _unsupported_model():
    """A dilated convolution (a field the spec's conv2d lacks) and a leaky ReLU (an ONNX op
    with no rule): what the spec cannot say yet."""
    return nn.Sequential(nn.Conv2d(3, 3, 3, padding=2, dilation=2), nn.LeakyReLU(), nn.Flatten(),
                         nn.Linear(3 * 4 * 4, 2))  # fmt: skip


def test_unsupported_nodes_exit_2_with_the_table_and_nothing_written(tmp_path, capsys):
    path = export(_unsupported_model(), (3, 4, 4), tmp_path / "mobile.onnx")
    models = tmp_path / "models"
    models.mkdir()
    assert main(["import", str(path), "--models-dir", str(models)]) == 2
    captured = capsys.readouterr()
    assert "unsupported: Conv with dilations=[2, 2]" in captured.out
    assert "LeakyRelu" in captured.out and "no rule" in captured.out
    (line,) = captured.err.strip().splitlines()
    assert "unsupported node types: Conv x1, LeakyRelu x1" in line and "nothing written" in line
    assert list(models.iterdir()) == []


def test_a_softmax_over_another_axis_is_refused_with_the_reason(tmp_path, capsys):
    """``nn.Softmax(dim=1)`` of an image is over its channels, not the spec's last axis: exit 2,
    the coverage table naming the axis, nothing written; over the width it reads."""

    class Over(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.softmax, self.fc = nn.Softmax(dim=dim), nn.Linear(3 * 4 * 4, 2)

        def forward(self, x):
            return self.fc(torch.flatten(self.softmax(x), 1))

    models = tmp_path / "models"
    models.mkdir()
    path = export(Over(1), (3, 4, 4), tmp_path / "channels.onnx")
    assert main(["import", str(path), "--models-dir", str(models)]) == 2
    captured = capsys.readouterr()
    assert "Softmax over axis 1 of a rank-4 tensor (the spec's is over the last axis)" in (
        captured.out
    )
    assert "unsupported node types: Softmax x1" in captured.err
    assert list(models.iterdir()) == []
    path = export(Over(-1), (3, 4, 4), tmp_path / "width.onnx")
    assert main(["import", str(path), "--models-dir", str(models)]) == 0
    assert "{op: softmax}" in (models / "width.yaml").read_text()


@pytest.mark.slow  # 2 s of export and checks (quick-tier budget)
def test_an_attention_that_is_not_the_spec_s_is_refused_by_its_check(tmp_path, capsys):
    """A causal mask on top of the key padding mask: the same MatMul/Softmax structure, another
    function. The region's check (ONNX Runtime on the cut-out nodes against the reference's
    attention at every head count) refuses it, on the Softmax's line: exit 2, nothing written."""

    class Causal(TransformerClassifier):
        def forward(self, ids):
            t = ids.shape[1]
            causal = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
            h = self.enc(self.emb(ids) + self.pos, mask=causal, src_key_padding_mask=ids == 0)
            return self.fc(h.mean(1))

    torch.manual_seed(1)
    path = export(Causal(), (12,), tmp_path / "causal.onnx")
    assert main(["import", "--check", str(path)]) == 2
    out = capsys.readouterr().out
    assert "unsupported: a MatMul/Softmax region that is not the spec's attention" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["causal.onnx"]


@pytest.mark.slow  # an encoder's export (quick-tier budget)
def test_a_region_whose_shapes_are_unknown_is_refused_not_guessed(tmp_path, capsys, monkeypatch):
    """Where ONNX's shape inference fails (a model over protobuf's 2 GiB), the regions cannot be
    sized for their check: each is refused with the reason, exit 2, nothing written."""
    torch.manual_seed(1)
    path = export(TransformerClassifier(), (12,), tmp_path / "encoder.onnx")

    def fail(model):
        raise ValueError("Message onnx.ModelProto exceeds maximum protobuf size of 2GB")

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", fail)
    assert main(["import", "--check", str(path)]) == 2
    assert "is not known (run onnx shape inference)" in capsys.readouterr().out


def test_a_ceil_mode_average_pool_is_refused(tmp_path, capsys):
    """``ceil_mode`` adds partial windows the spec's floor does not have: one line, exit 2."""
    model = nn.Sequential(nn.AvgPool2d(3, 2, ceil_mode=True), nn.Flatten())
    path = export(model, (2, 6, 6), tmp_path / "pool.onnx")
    assert main(["import", "--check", str(path)]) == 2
    assert "unsupported: AveragePool with ceil_mode=1" in capsys.readouterr().out


@pytest.mark.parametrize(
    "name",
    [
        "cnn",
        pytest.param("resnet50", marks=pytest.mark.slow),
        "gru",
        "probe_lstm_0",
        pytest.param("transformer", marks=pytest.mark.slow),
    ],
)  # resnet50's 3 s: slow tier (quick-tier budget)
def test_export_then_import_is_the_same_function(tmp_path, name):
    """A built-in workload (or the lstm's probe: no built-in workload has one) through
    ``rosetta export`` and back: bit-equal weights in the same order (names made spec names:
    ``layer1.0.conv1`` -> ``layer1_0_conv1``), equal outputs."""
    from rosetta.export import graph as exporter
    from rosetta.importer.run import import_model
    from rosetta.spec import get_workload
    from rosetta.spec.probes import probe_workload

    w = probe_workload("lstm", 0) if name.startswith("probe_") else get_workload(name)
    w = w.at_image_size(32) if w.input.dtype == "float32" else w
    params = canonical_weights(w, 0)
    path = tmp_path / f"{name}.onnx"
    path.write_bytes(exporter.to_model(w, params, "float32", 17).SerializeToString())
    done = import_model(path, tmp_path, f"back_{name}")
    back = load_workload(done.spec_path)
    theirs = canonical_weights(back, 0)
    assert [p.shape for p in w.param_specs] == [p.shape for p in back.param_specs]
    assert [p.name.replace(".", "_") for p in w.param_specs] == [
        p.name.replace(".", "_") for p in back.param_specs
    ]
    assert all(np.array_equal(params[a.name], theirs[b.name])
               for a, b in zip(w.param_specs, back.param_specs, strict=True))  # fmt: skip
    x = sample_input(w, 3, 0)
    if w.input.dtype == "int32":
        x[-1] = 0  # a row of padding only: the masked ops' edge, the same function both ways
    # both from the float32 values the file holds (the built-in's float64 draw is not them)
    outs = [
        backends.make("numpy_ref", v, {k: a.astype(np.float64) for k, a in p.items()},
                      dtype="float64").predict_numpy(x)
        for v, p in ((w, params), (back, theirs))
    ]  # fmt: skip
    np.testing.assert_array_equal(outs[0], outs[1])


# -- refusals: one line, nothing written ------------------------------------------------------


def _refused(tmp_path, capsys, argv, words) -> None:
    models = tmp_path / "models"
    models.mkdir(exist_ok=True)
    rc = main(["import", *argv, "--models-dir", str(models)])
    err = capsys.readouterr().err.strip()
    assert rc != 0 and len(err.splitlines()) == 1 and words in err, err
    assert list(models.iterdir()) == []


def test_a_truncated_or_foreign_file_is_refused(tmp_path, capsys):
    good = export(Mlp(), (3, 4, 4), tmp_path / "mlp.onnx").read_bytes()
    (tmp_path / "cut.onnx").write_bytes(good[: len(good) // 3])
    _refused(tmp_path, capsys, [str(tmp_path / "cut.onnx")], "not an ONNX model")
    (tmp_path / "text.onnx").write_text("name: cnn\nlayers: []\n")
    _refused(tmp_path, capsys, [str(tmp_path / "text.onnx")], "not an ONNX model")
    _refused(tmp_path, capsys, [str(tmp_path / "absent.onnx")], "not a regular file")


def _with_external(tmp_path, location: str) -> Path:
    """The MLP with its first weight stored as external data at ``location``."""
    path = export(Mlp(), (3, 4, 4), tmp_path / "ext.onnx")
    model = onnx.load(str(path))
    tensor = next(t for t in model.graph.initializer if t.name == "fc1.weight")
    tensor.ClearField("raw_data")
    tensor.data_location = onnx.TensorProto.EXTERNAL
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", location
    path.write_bytes(model.SerializeToString())
    return path


@pytest.mark.parametrize("where", ["../outside.bin", "/etc/hostname", "link.bin"])
def test_external_data_leaving_the_folder_is_refused(tmp_path, capsys, where):
    (tmp_path / "link.bin").symlink_to("/etc/hostname")
    path = _with_external(tmp_path, where)
    _refused(tmp_path, capsys, [str(path)], "leaves the model's folder")


def test_an_initializer_over_the_bound_is_refused(tmp_path, capsys, monkeypatch):
    import rosetta.importer.source as source

    monkeypatch.setattr(source, "MAX_TENSOR_VALUES", 100)  # fc1.weight holds 48 x 32
    path = export(Mlp(), (3, 4, 4), tmp_path / "mlp.onnx")
    _refused(tmp_path, capsys, [str(path)], "brings the values over 100")


def test_dynamic_dimensions_need_an_input_shape(tmp_path, capsys):
    path = export(
        vgg(), (3, 32, 32), tmp_path / "dyn.onnx",
        input_names=["x"], dynamic_axes={"x": {0: "n", 2: "h", 3: "w"}},
    )  # fmt: skip
    _refused(tmp_path, capsys, [str(path)], "--input-shape C,H,W")
    models = tmp_path / "models"
    assert main(["import", str(path), "--models-dir", str(models), "--input-shape", "3,32,32"]) == 0
    assert (models / "dyn.yaml").is_file()


def test_inputs_other_than_floats_and_token_ids_and_old_opsets_are_refused(tmp_path, capsys):
    from onnx import TensorProto, helper

    path = tmp_path / "ids.onnx"
    for kind, dims, words in (
        (TensorProto.BOOL, [1, 8], "read are float inputs"),
        (TensorProto.INT64, [1, 8, 2], "token ids of shape (N, T) only"),
    ):
        x = helper.make_tensor_value_info("ids", kind, dims)
        y = helper.make_tensor_value_info("y", kind, dims)
        graph = helper.make_graph([helper.make_node("Identity", ["ids"], ["y"])], "g", [x], [y])
        path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                         .SerializeToString())  # fmt: skip
        _refused(tmp_path, capsys, [str(path)], words)
    f = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    g = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])
    old = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [f], [g])
    path.write_bytes(helper.make_model(old, opset_imports=[helper.make_opsetid("", 11)])
                     .SerializeToString())  # fmt: skip
    _refused(tmp_path, capsys, [str(path)], "opset 11 is below 13")


def test_names_in_the_file_are_data(tmp_path):
    """An initializer named like code becomes a plain spec name; the file's text never reaches
    the spec or the generated source as anything but that name."""
    from rosetta import codegen
    from rosetta.importer.run import import_model

    path = export(Mlp(), (3, 4, 4), tmp_path / "mlp.onnx")
    model = onnx.load(str(path))
    evil = "__import__('os').system('echo pwned')#.weight"
    for t in model.graph.initializer:
        if t.name == "fc1.weight":
            t.name = evil
    for i, node in enumerate(model.graph.node):
        node.input[:] = [evil if n == "fc1.weight" else n for n in node.input]
        node.name = f"x\ny: {{op: relu}} {i}"
    path.write_bytes(model.SerializeToString())
    done = import_model(path, tmp_path, "evil")
    text = done.spec_path.read_text()
    assert "system" not in text.replace("__import___os___system", "") and "pwned" not in text
    w = load_workload(done.spec_path)
    source = codegen.generate(w, "torch").text
    assert "pwned" not in source and "import__" not in source.replace("__import___os", "")
    assert all(p.name.split(".")[0].isidentifier() for p in w.param_specs)


def test_a_changed_weights_file_is_refused(corpus):
    _, workload = corpus["mlp"]
    blob = workload.weights.path.read_bytes()
    try:
        workload.weights.path.write_bytes(blob[:-1] + bytes([blob[-1] ^ 1]))
        with pytest.raises(RosettaError, match="sha256 differs"):
            canonical_weights(workload, 0)
    finally:
        workload.weights.path.write_bytes(blob)
