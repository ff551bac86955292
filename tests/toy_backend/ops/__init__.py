"""The toy lowers the MLP's four ops; every other op of the spec is declared, never silent."""

from rosetta.spec import ops

LOWERED = ("flatten", "dense", "relu", "dropout")
UNSUPPORTED = {
    name: "a toy backend: it lowers only the MLP's ops"
    for name in ops.OPS
    if name not in LOWERED and name != "residual"
}
