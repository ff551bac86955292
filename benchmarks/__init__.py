"""Benchmarks: speed comparisons measured side by side in one process (never in the tests).

One entry point, one output format: ``python -m benchmarks NAME [options]`` runs
``benchmarks/NAME.py``'s ``main(argv)``; every benchmark prints a table of ratios with bootstrap
95% intervals and writes the same rows as JSON to ``benchmarks/out/NAME.json``.
"""
