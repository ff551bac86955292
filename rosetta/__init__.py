"""Rosetta: one framework-neutral workload spec, lowered to many deep-learning frameworks.

The package layout follows one idea per folder:

- ``rosetta.spec``      parse, validate and analyse the neutral workload specs (NumPy only)
- ``rosetta.backends``  one module per framework, all exposing the same entry points
- ``rosetta.datasets``  CIFAR-10 / IMDB / ResNet inputs, real or synthetic, same formats
- ``rosetta.cli``       the ``rosetta`` command
"""

__version__ = "0.1.0"
