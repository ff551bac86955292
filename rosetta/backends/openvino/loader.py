"""The native loader: NumPy batches of the runner's order (``rosetta.export.serving``).

An engine's input *is* a host array (an ``InferRequest`` reads NumPy), so the loader hands out
``x[order]`` in complete batches, float32 images or int32 token ids, as they are."""
