"""What redaction adds to writing a record: ``redact_value`` against ``json.dumps`` of the same record.

    .venv/bin/python -m benchmarks.redact_speed [--records 2000] [--repeats 7]

Every record the project writes (a world's node, an evaluation row, a dream run's line) passes
through ``redact_value`` before ``json.dumps``. The record here is a node of about 10 KB (9,500
characters of code, an error, 20 lines of diagnostics, a cost) with five API keys in the
environment and none in the record, the usual case; a second row has one key in its code. Both
are timed in the same run, alternated, medians of the repeats, microseconds a record; the ratio
is redaction's cost over the JSON encoding's.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import statistics
import time
from collections.abc import Callable
from typing import Any

from dream_gym.infrastructure.redact import redact_value


def record_of(code: str) -> dict[str, Any]:
    return {"id": "r3w1", "parent": "r2w0", "score": None, "code": code, "error": "ValueError: boom",
            "diagnostics": "Traceback ...\n" * 20, "cost": {"seconds": 1.2, "tokens_in": 900.0}}


def per_record_us(fn: Callable[[Any], Any], record: dict[str, Any], records: int) -> float:
    start = time.perf_counter()
    for _ in range(records):
        fn(record)
    return (time.perf_counter() - start) * 1e6 / records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    keys = [secrets.token_urlsafe(30) for _ in range(5)]
    for i, key in enumerate(keys):
        os.environ[f"BENCH{i}_API_KEY"] = key
    rng = random.Random(0)
    code = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz ABC_():.,\n0123456789") for _ in range(9500))
    cases = {"no secret in the record": record_of(code),
             "one key in its code": record_of(code[:4000] + keys[2] + code[4000:])}
    print(f"## redact_value against json.dumps, a 10 KB record, 5 keys in the environment "
          f"({args.records} records, median of {args.repeats})")
    print("| record | redact_value (us) | json.dumps (us) | ratio |")
    print("|---|---:|---:|---:|")
    for label, record in cases.items():
        redact_value(record)  # builds the matchers once, as the first write does
        redacting: list[float] = []
        encoding: list[float] = []
        for _ in range(args.repeats):
            redacting.append(per_record_us(redact_value, record, args.records))
            encoding.append(per_record_us(json.dumps, record, args.records))
        redact_us, dumps_us = statistics.median(redacting), statistics.median(encoding)
        print(f"| {label} | {redact_us:.1f} | {dumps_us:.1f} | {redact_us / dumps_us:.2f} |")


if __name__ == "__main__":
    main()
