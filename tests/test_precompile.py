"""``python -m dream_gym.envs.precompile`` (run by ``make`` after installing) compiles every
replay kernel into numba's cache, so that processes started side by side on a fresh install do
not each compile them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from numba.core.caching import NullCache
from numba.core.registry import CPUDispatcher

import dream_gym.replay.engine
import dream_gym.replay.vector
import dream_gym.replay.vector_engine

KERNEL_MODULES = (dream_gym.replay.engine, dream_gym.replay.vector, dream_gym.replay.vector_engine)


def cached_kernels() -> set[str]:
    """``module.kernel`` of every compiled entry point of the replay layer that numba caches (the
    functions inlined into them compile with them)."""
    return {f"{module.__name__.rsplit('.', 1)[1]}.{name}" for module in KERNEL_MODULES
            for name, kernel in vars(module).items()
            if isinstance(kernel, CPUDispatcher) and kernel.__module__ == module.__name__
            and not isinstance(kernel._cache, NullCache) and kernel.targetoptions.get("inline") != "always"}


def run_precompile(cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dream_gym.envs.precompile"], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "NUMBA_CACHE_DIR": str(cache)})


@pytest.mark.slow
def test_precompile_caches_every_replay_kernel_and_a_second_run_only_loads_them(tmp_path: Path) -> None:
    expected = cached_kernels()
    assert {"engine._episode_kernel", "vector_engine.step_kernel", "vector._ranked_kernel"} <= expected
    done = run_precompile(tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "the replay kernels are compiled and cached" in done.stdout
    written = sorted(tmp_path.rglob("*.nbi"))
    assert {path.name.split("-")[0] for path in written} == expected
    stamps = {path: path.stat().st_mtime_ns for path in tmp_path.rglob("*")}
    assert run_precompile(tmp_path).returncode == 0
    assert {path: path.stat().st_mtime_ns for path in tmp_path.rglob("*")} == stamps  # loaded, not compiled
