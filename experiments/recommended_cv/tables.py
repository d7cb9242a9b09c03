"""The tables the portfolio candidates learn from (PROTOCOL.md §4), computed once by replay.

* **portfolio**: V½ of every configuration of P on every real run at every setting
  (``out/rcv/tables/portfolio.json``); ``tuned`` picks from it, fold by fold.
* **rollouts** of an opening c0: on every real run and every synthetic world, at every setting and
  β in {0.2, 0.5, 0.8}: V of keeping c0, and at each decision point c0 reaches, the switch's
  features and V of switching there to each configuration and of stopping
  (``out/rcv/tables/rollouts-<c0>.json``); ``switch`` fits and selects from it.

Episodes run in this process (``dream_gym.policy.run_episode``, seed 0, the settings' W, β1, β2:
what ``dream_gym.evaluation.evaluate.evaluate`` runs per episode).

    nice -n 15 .venv/bin/python -m experiments.recommended_cv.tables portfolio
    nice -n 15 .venv/bin/python -m experiments.recommended_cv.tables rollouts --opening ucb_a200
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dream_gym.evaluation.world_specs import resolve_worlds
from dream_gym.policy import run_episode
from dream_gym.replay.settings import ReplaySettings
from dream_gym.world.tree import World, load_world
from experiments.recommended_cv.common import OUT, REAL, SETTINGS, all_runs
from experiments.recommended_cv.portfolio import CONFIGS, STOP, configured
from experiments.recommended_cv.switch import SwitchPolicy

TABLES = OUT / "tables"
SYNTHETIC = "dream-gym/recorded-v1,dream-gym/recorded-v0"
ROLLOUT_BETAS = (0.2, 0.5, 0.8)


def replay_settings(setting: Any) -> ReplaySettings:
    return ReplaySettings(workers=setting.workers, beta1=setting.beta1, beta2=setting.beta2)


def value(policy: Any, world: World, setting: Any, beta: float) -> float:
    result = run_episode(policy, world, seed=0, on_error="raise", settings=replay_settings(setting), beta=beta)
    return float(result.replay_score)


def real_worlds() -> dict[str, World]:
    return {run: load_world(REAL / run) for run in all_runs()}


def portfolio_table() -> dict[str, Any]:
    """{config: {setting: {run: V½}}}."""
    worlds = real_worlds()
    return {config: {s.name: {run: value(configured(config), world, s, 0.5) for run, world in worlds.items()}
                     for s in SETTINGS} for config in CONFIGS}


def rollouts(world: World, setting: Any, beta: float, opening: str) -> dict[str, Any]:
    """Keeping c0, and every switch at every decision point c0 reaches."""
    record: list[tuple[int, Any]] = []
    keep = value(SwitchPolicy(opening=opening, record=record), world, setting, beta)
    points = []
    for point, features in record:
        values = {target: value(SwitchPolicy(opening=opening, force={point: target}), world, setting, beta)
                  for target in (*CONFIGS, STOP)}
        points.append({"point": point, "features": [float(x) for x in features], "values": values})
    return {"keep": keep, "points": points}


def rollout_table(opening: str, synthetic: Sequence[World] | None = None, log: Any = print) -> dict[str, Any]:
    """{"real": {run: {setting: {beta: rollouts}}}, "synthetic": {world: ...}}."""
    started = time.perf_counter()
    groups = {"real": real_worlds(),
              "synthetic": {w.id: w for w in (synthetic if synthetic is not None else resolve_worlds(SYNTHETIC))}}
    table: dict[str, Any] = {"opening": opening, "betas": list(ROLLOUT_BETAS), "real": {}, "synthetic": {}}
    for group, worlds in groups.items():
        for name, world in worlds.items():
            table[group][name] = {s.name: {f"{b:g}": rollouts(world, s, b, opening) for b in ROLLOUT_BETAS}
                                  for s in SETTINGS}
            log(f"{opening}: {group} {name} ({time.perf_counter() - started:.0f} s)")
    return table


def write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    tmp.replace(path)


def portfolio_path() -> Path:
    return TABLES / "portfolio.json"


def rollout_path(opening: str) -> Path:
    return TABLES / f"rollouts-{opening}.json"


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table", choices=("portfolio", "rollouts"))
    parser.add_argument("--opening", help="c0 of the rollouts")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    if args.table == "portfolio":
        write(portfolio_path(), portfolio_table())
        print(f"portfolio: {len(CONFIGS)} configurations in {time.perf_counter() - started:.0f} s")
    else:
        if args.opening not in CONFIGS:
            parser.error(f"--opening must be a configuration of P, got {args.opening!r}")
        write(rollout_path(args.opening), rollout_table(args.opening, log=lambda _: None))
        print(f"rollouts of {args.opening} in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
