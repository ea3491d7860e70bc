"""``python -m anchorgpu.simulations.child``: one planner simulation in a process of its own.

The runner starts this process for each job, so that torch's memory, a
crash or a run past the time limit never touches the server or the worker.
No Django here: the planner alone.

Protocol. stdin: one JSON object ``{"model": {"preset": name} | {"config":
{...}}, "setup": {...}, "card_counts": [...]}``. stderr: lines
``progress: <code>`` while it runs (a ``planner.progress`` code) (anything else on stderr is a log).
stdout: one JSON object, ``{"ok": true, "steps": [...]}`` (the measured
steps, ``MeasuredSteps.to_json()``) or ``{"ok": false, "failure": "input" |
"unavailable", "error": "..."}``. The exit status is 0 in both cases; any
other status is a crash.
"""

from __future__ import annotations

import json
import sys

PROGRESS = "progress: "


def _answer(data: dict) -> int:
    json.dump(data, sys.stdout)
    sys.stdout.write("\n")
    sys.stdout.flush()
    return 0


def _say(progress) -> None:
    """One stage of the simulation, as its code (``planner.progress``): the shop says it in the reader's language."""
    sys.stderr.write(PROGRESS + progress.code() + "\n")
    sys.stderr.flush()


def run(request: object) -> int:
    from anchorgpu.planner.errors import PlannerInputError
    from anchorgpu.planner.model_tree import spec_from_any_config
    from anchorgpu.planner.presets import preset_spec
    from anchorgpu.planner.setup import setup_from_mapping

    try:
        if not isinstance(request, dict):
            raise PlannerInputError("request", "the request is a JSON object.")
        model, counts = request.get("model"), request.get("card_counts") or [1]
        if not isinstance(model, dict) or not ({"preset"} == set(model) or {"config"} == set(model)):
            raise PlannerInputError("model", "give the model as {\"preset\": name} or {\"config\": {...}}.")
        if not isinstance(counts, list) or not all(isinstance(c, int) and not isinstance(c, bool) and 0 < c <= 1024
                                                  for c in counts):
            raise PlannerInputError("card_counts", "card counts are whole numbers from 1 to 1024.")
        spec = preset_spec(model["preset"]) if "preset" in model else spec_from_any_config(model["config"])
        setup = setup_from_mapping(request.get("setup") or {}).validate(spec)
    except PlannerInputError as exc:
        return _answer({"ok": False, "failure": "input", "error": exc.message})
    try:
        from anchorgpu.planner.simulate import simulate_steps
    except ImportError as exc:
        return _answer({"ok": False, "failure": "unavailable",
                        "error": f"the simulation needs the ml extra (torch, transformers, peft): {exc}"})
    try:
        steps = simulate_steps(spec, setup, counts, progress=_say)
    except PlannerInputError as exc:
        return _answer({"ok": False, "failure": "input", "error": exc.message})
    return _answer({"ok": True, "steps": steps.to_json()})


def main() -> int:
    try:
        request = json.loads(sys.stdin.read())
    except ValueError as exc:
        return _answer({"ok": False, "failure": "input", "error": f"the request is not JSON: {exc}"})
    return run(request)


if __name__ == "__main__":
    sys.exit(main())
