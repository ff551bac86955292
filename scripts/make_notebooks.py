"""Regenerate notebooks/<backend>.ipynb from rosetta.runner.notebook (committed without outputs).

.venv/bin/python scripts/make_notebooks.py
"""

from rosetta.runner.notebook import write_notebooks

if __name__ == "__main__":
    for path in write_notebooks():
        print(f"wrote {path}")
