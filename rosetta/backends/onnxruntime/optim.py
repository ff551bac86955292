"""No optimiser: ONNX Runtime runs the exported forward graph only (``FORWARD_ONLY``)."""
