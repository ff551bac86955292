"""The Keras file on the PyTorch engine: the shared Keras model and optimiser
(``keras_common.py``), and a training step as Keras' own ``TorchTrainer.train_step`` writes it:
the forward pass, ``loss.backward()`` on the variables' torch parameters, and
``optimizer.apply`` under ``torch.no_grad()``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.keras_common import codegen as keras_common
from rosetta.spec.workload import Workload

if TYPE_CHECKING:
    from rosetta.codegen import Rendered

FRAMEWORK = "Keras on PyTorch"
IMPORTS = "import torch  # noqa: E402\n"
#: the modules its generated file imports (beyond the standard library)
MODULES = ("numpy", "keras", "torch")

STEP = '''

def gradients(model, x, y, training):
    """The loss and each trainable variable's gradient (``backward`` on the torch parameters)."""
    variables = model.trainable_variables
    for v in variables:
        v.value.grad = None
    loss = loss_fn(y, model(x, training=training))
    loss.backward()
    return loss, [v.value.grad for v in variables]


def make_train_step(model, optimizer):
    """One optimiser step on (x, y); training=False: dropout off."""

    def train_step(x, y, training=True):
        loss, grads = gradients(model, x, y, training)
        with torch.no_grad():
            optimizer.apply(grads, model.trainable_variables)
        return loss.detach()

    return train_step
'''


def _check(workload: Workload) -> str:
    train = ""
    if workload.task == "train":
        train = """
    if y is not None:
        yt = torch.as_tensor(y.astype(np.int64))
        loss, grads = gradients(model, xt, yt, training=False)
        out["loss"] = np.float64(loss.item())
        by_var = dict(zip(map(id, model.trainable_variables), grads))
        out.update({f"grad:{n}": a for n, a in read_weights(model, by_var).items()})
        train_step = make_train_step(model, make_optimizer(model))
        for _ in range(k):
            train_step(xt, yt, training=False)
        out.update({f"params:{n}": a for n, a in read_weights(model).items()})"""
    return f'''

def features_step(model, x):
    """Evaluation-mode forward pass (dropout off, BatchNorm on its running statistics)."""
    with torch.no_grad():
        return model(x, training=False)


def check(weights, x, y, k, dtype="float32"):
    """Forward, loss, gradients and k steps on one batch, in canonical names and layouts."""
    if dtype == "float64":
        keep_float64()
    keras.config.set_floatx(dtype)
    keras.utils.set_random_seed(0)
    model = build_model()
    load_weights(model, weights)
    xt = {keras_common.to_input(workload)}
    xt = torch.as_tensor(np.ascontiguousarray(xt))
    out = {{"forward": keras.ops.convert_to_numpy(features_step(model, xt))}}{train}
    return out
'''


def source(workload: Workload, rendered: Rendered) -> str:
    """The whole generated Keras-on-PyTorch file for ``workload``."""
    return keras_common.source(
        workload, rendered, framework=FRAMEWORK, backend="keras_torch", engine="torch",
        engine_imports=IMPORTS, step=STEP if workload.task == "train" else "",
        check=_check(workload),
    )  # fmt: skip
