"""An OpenEvolve-style evaluator written for dream_gym's tests: it reads a file beside it and a data set
it looks for below the user's home folder (as OpenEvolve's AlgoTune examples look for their library
at Path.home() / "github" / "AlgoTune"), then scores how close the program's guess comes to the data."""

import importlib.util
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = Path.home() / "datasets" / "target"


def evaluate(program_path):
    weight = float((HERE / "weight.txt").read_text(encoding="utf-8"))
    try:
        target = float((DATA / "value.txt").read_text(encoding="utf-8"))
    except OSError as exc:
        return {"combined_score": 0.0, "error": f"the data set is not readable: {exc}"}
    spec = importlib.util.spec_from_file_location("candidate", program_path)
    program = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(program)
    return {"combined_score": weight / (1.0 + abs(float(program.guess()) - target))}
