"""The Keras file on the JAX engine: the shared Keras model and optimiser
(``keras_common.py``), and a training step as a jitted *stateless* function of the model's state
(``model.stateless_call``, ``jax.value_and_grad``, ``optimizer.stateless_apply``), as Keras'
guide to custom training loops in JAX writes it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.keras_common import codegen as keras_common
from rosetta.spec.workload import Workload

if TYPE_CHECKING:
    from rosetta.codegen import Rendered

FRAMEWORK = "Keras on JAX"
IMPORTS = "import jax  # noqa: E402\n"
#: the modules its generated file imports (beyond the standard library)
MODULES = ("numpy", "keras", "jax")

STEP = '''

def get_state(model, optimizer):
    """The model's state as JAX arrays: (trainable, non-trainable, optimiser variables)."""
    return (
        [v.value for v in model.trainable_variables],
        [v.value for v in model.non_trainable_variables],
        [v.value for v in optimizer.variables],
    )


def set_state(model, optimizer, state):
    """Write a state back into the model's and the optimiser's variables."""
    variables = (model.trainable_variables, model.non_trainable_variables, optimizer.variables)
    for group, values in zip(variables, state):
        for var, value in zip(group, values):
            var.assign(value)


def make_train_step(model, optimizer):
    """One optimiser step as a jitted function of the state; training=False: dropout off."""

    def loss_of(trainable, non_trainable, x, y, training):
        logits, non_trainable = model.stateless_call(trainable, non_trainable, x, training=training)
        return loss_fn(y, logits), non_trainable

    grad_fn = jax.value_and_grad(loss_of, has_aux=True)

    def train_step(state, x, y, training=True):
        trainable, non_trainable, optimizer_variables = state
        (loss, non_trainable), grads = grad_fn(trainable, non_trainable, x, y, training)
        trainable, optimizer_variables = optimizer.stateless_apply(
            optimizer_variables, grads, trainable
        )
        return loss, (trainable, non_trainable, optimizer_variables)

    return jax.jit(train_step, static_argnames="training"), grad_fn
'''


def _check(workload: Workload) -> str:
    train = ""
    if workload.task == "train":
        train = """
    if y is not None:
        yt = y.astype(np.int32)
        optimizer = make_optimizer(model)
        train_step, grad_fn = make_train_step(model, optimizer)
        state = get_state(model, optimizer)
        (loss, _), grads = grad_fn(state[0], state[1], xt, yt, False)
        out["loss"] = np.float64(loss)
        by_var = dict(zip(map(id, model.trainable_variables), grads))
        out.update({f"grad:{n}": a for n, a in read_weights(model, by_var).items()})
        for _ in range(k):
            _, state = train_step(state, xt, yt, training=False)
        set_state(model, optimizer, state)
        out.update({f"params:{n}": a for n, a in read_weights(model).items()})"""
    return f'''

def features_step(model, x):
    """Evaluation-mode forward pass (dropout off, BatchNorm on its running statistics)."""
    return model(x, training=False)


def check(weights, x, y, k, dtype="float32"):
    """Forward, loss, gradients and k steps on one batch, in canonical names and layouts."""
    if dtype == "float64":
        jax.config.update("jax_enable_x64", True)
        keep_float64()
    keras.config.set_floatx(dtype)
    keras.utils.set_random_seed(0)
    model = build_model()
    load_weights(model, weights)
    xt = {keras_common.to_input(workload)}
    out = {{"forward": keras.ops.convert_to_numpy(features_step(model, xt))}}{train}
    return out
'''


def source(workload: Workload, rendered: Rendered) -> str:
    """The whole generated Keras-on-JAX file for ``workload``."""
    return keras_common.source(
        workload, rendered, framework=FRAMEWORK, backend="keras_jax", engine="jax",
        engine_imports=IMPORTS, step=STEP if workload.task == "train" else "",
        check=_check(workload),
    )  # fmt: skip
