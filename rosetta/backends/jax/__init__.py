"""Backend ``jax``: the spec lowered to jitted JAX programs (``jax.lax`` + optax), run by XLA.

Each op of the spec is one module ``ops/<op>.py``: its lax function (``build``), its line of the
generated source (``render``) and, where JAX's layout differs from the spec's, its parameters'
conversions (``param_layout``), side by side; ``source.py`` makes them one table (``OPS``);
``lowering.py`` holds what the op functions share and how they compose (and why lax rather than
Flax); ``weights.py`` gathers the op modules' layout rules and converts images and a flatten's
output; ``optim.py`` the optax transformations checked against the spec's rules; ``loader.py``
the device-prefetching loader; ``runtime.py`` the process settings (platforms, threads by CPU
affinity, TF32, the float64 scope), applied before JAX starts its clients; ``model.py`` the
jitted train/grads/predict programs and both faces of the contract. Float32 and float64, CPU
and CUDA (CUDA ran on an H200: docs/gpu/).
"""

from rosetta.backends.base import BackendAPI

NAME = "jax"
DEVICES = ("cpu", "cuda")
DTYPES = ("float32", "float64")
PRECISIONS = ("fp32", "bf16")  # bf16: compute casts in the jitted step (model.py)

_api = BackendAPI(__name__, DEVICES)
available, versions, cuda_available = _api.available, _api.versions, _api.cuda_available
configure, build, run_op = _api.configure, _api.build, _api.run_op

# what the rest of Rosetta reads of this backend (rosetta.backends.constant)
PAGE_NAME = "JAX"  # its column on the report's Rosetta page
COLOUR = "#009E73"  # its colour in the report's charts
#: the peak probe: (framework, a script timing an NxN matmul, fp32 and bf16) -> run.json
GEMM_PROBE = (
    "jax",
    """
import jax, jax.numpy as jnp
out = {}
for name, dt in (("fp32", jnp.float32), ("bf16", jnp.bfloat16)):
    a = jax.random.uniform(jax.random.PRNGKey(0), (N, N)).astype(dt); b = a.T
    f = jax.jit(jnp.dot)
    out[name] = flop / best(lambda: f(a, b).block_until_ready()) / 1e9
print(json.dumps(out))
""",
)
