"""Makes one ablation cell fail at start-up (tests/flows/test_ablation.py): test tooling, nothing in ``lead/``
knows about it.

Python imports ``sitecustomize`` from ``PYTHONPATH`` at start-up; the test puts this folder there for one flow
run. In the process of ``python -m lead.stages.ablation_cell --variant <LEAD_FAILING_VARIANT> ...`` it exits 1
before the cell does anything (no model, no MLflow run), as a cell that crashes would; every other process
(DVC, the other cells, the upstream stages) runs untouched.
"""

import os
import sys

_variant = os.environ.get("LEAD_FAILING_VARIANT")
if _variant and "--variant" in sys.argv[:-1] and sys.argv[sys.argv.index("--variant") + 1] == _variant:
    sys.exit(f"injected failure: the {_variant} cell (tests/flows/failing_cell)")
