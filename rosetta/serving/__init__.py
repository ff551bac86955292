"""Serving scenarios driven by MLPerf's own load generator (``mlcommons-loadgen``).

A *serving cell* is one backend x workload x scenario, run in its own process like every cell:
LoadGen issues the queries (SingleStream one at a time, MultiStream a few samples at once, Offline
all at once, Server at random arrival times at a target rate) to a system under test that wraps
the backend's prediction path (``predict_numpy``: canonical NumPy in, canonical NumPy out, the
same path for every framework and engine), over a query-sample library of the workload's own
test samples. Server and Offline batch queries with one dynamic batcher (a max batch and a max
wait, the same for every backend, recorded). LoadGen's summary (VALID or INVALID and why, the
percentiles, samples per second) is read into the record, and its accuracy log is checked
against the float64 reference's outputs for the same samples: the gate, seen through the serving
path.

Modules: :mod:`~rosetta.serving.scenarios` (names, budgets per profile, LoadGen's settings),
:mod:`~rosetta.serving.batcher` (the dynamic batcher), :mod:`~rosetta.serving.sut` (the system
under test and the sample library), :mod:`~rosetta.serving.summary` (LoadGen's logs read back),
:mod:`~rosetta.serving.run` (a scenario, the Server search, the accuracy check),
:mod:`~rosetta.serving.cell` (the process of one serving cell).
"""
