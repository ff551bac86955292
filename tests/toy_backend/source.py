"""The toy's op table: its ``ops/`` folder, composed as the reference composes."""

from rosetta.backends.driver import Entry, discover
from rosetta.backends.numpy_ref.source import residual, sequence

NAME = "toy"
OPS = discover(NAME, __package__ + ".ops", Entry("sequence", sequence), Entry("residual", residual))
RENDER = OPS.rendering()
