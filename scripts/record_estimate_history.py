"""Record a run's LLM usage (every finished stage's steps: requests, calls, duplicates, tokens, parse outcomes) as the
bundled estimate record of its model ([paths] estimate_history, one JSON file a model). A first `groundbench estimate`
with that model is calibrated on it while the runs folder holds no run of the model; a run in the runs folder comes
first. The bundled record of the smoke model is written from a fresh demo run (empty cache):

    BENCH_DEMO_KEEP=/tmp/demo python benchmarks/run_all.py --only demo
    python scripts/record_estimate_history.py /tmp/demo/runs/demo"""
import sys

from groundbench.core import load_settings
from groundbench.plan.steps import record_history

if len(sys.argv) != 2: sys.exit(__doc__)
print(record_history(sys.argv[1], load_settings()))
