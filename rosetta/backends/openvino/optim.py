"""No optimiser: OpenVINO runs the exported forward graph only (``FORWARD_ONLY``)."""
