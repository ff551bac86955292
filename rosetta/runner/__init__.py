"""Running cells: one (backend, workload, profile) measured in its own process, recorded as JSON.

``cell.run_cell`` is the whole measurement of one cell (the notebooks call it);
``matrix.run_matrix`` runs many cells, each in a fresh process, and never loses a record;
``clock`` holds the timing rules; ``manifest`` the environment; ``records`` the JSON store.
"""
