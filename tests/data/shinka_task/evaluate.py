"""A ShinkaEvolve evaluation script written for dream_gym's tests (ShinkaEvolve's own form: run with
--program_path and --results_dir, it writes correct.json and metrics.json through run_shinka_eval).

The program's run_experiment() returns a number; combined_score is 1 / (1 + its distance to 3).
"""

import argparse

from shinka.core import run_shinka_eval

TARGET = 3.0


def validate(result):
    valid = isinstance(result, (int, float)) and result >= 0
    return valid, None if valid else f"expected a number >= 0, got {result!r}"


def aggregate(results):
    value = float(results[0])
    return {"combined_score": 1.0 / (1.0 + abs(value - TARGET)), "public": {"value": value}, "private": {}}


def main(program_path, results_dir):
    run_shinka_eval(program_path=program_path, results_dir=results_dir, experiment_fn_name="run_experiment",
                    num_runs=1, validate_fn=validate, aggregate_metrics_fn=aggregate)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--program_path", required=True)
    parser.add_argument("--results_dir", required=True)
    arguments = parser.parse_args()
    main(arguments.program_path, arguments.results_dir)
