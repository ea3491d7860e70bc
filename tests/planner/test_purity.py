"""The planner is domain core: it imports and runs without Django and without torch."""

import subprocess
import sys


def test_the_planner_imports_neither_django_nor_torch():
    code = ("import sys\n"
            "import anchorgpu.planner as planner\n"
            "spec = planner.preset_spec('tiny-llama')\n"
            "planner.estimate(spec, planner.TrainingSetup(seq_len=64))\n"
            "leaked = sorted(m for m in sys.modules if m.split('.')[0] in {'django', 'torch', 'transformers'})\n"
            "print(','.join(leaked))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"imported by the planner: {done.stdout.strip()}"
