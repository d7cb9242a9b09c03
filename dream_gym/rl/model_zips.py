"""Model zips loaded as data: a stable-baselines3 zip runs none of the code it may hold.

An SB3 zip is a ``data`` entry (JSON) beside the weights (``policy.pth``, ``policy.optimizer.pth``,
``pytorch_variables.pth``). Every attribute SB3 cannot write as JSON (the policy class, the
spaces, the schedules, the rollout buffer class, the last observation) goes into ``data`` as a
cloudpickle (``{":type:": ..., ":serialized:": base64}``), and ``PPO.load`` unpickles each one:
whoever wrote the zip can put any program there, and it runs the moment the zip is loaded.
Models are shared like datasets, so :func:`load_model_zip` reads them as data:

* the zip may hold the entries SB3 writes only (:data:`SB3_ENTRIES`); every ``.pth`` must load with
  ``torch.load(..., weights_only=True)`` (tensors and plain containers: SB3 2.9 loads them so too,
  and one that passes holds nothing another loader could run), and ``pytorch_variables.pth`` must
  be empty (PPO saves none there; SB3 would set each one it finds as an attribute path);
* ``data`` is read as JSON here, its entries must be attributes SB3 saves for PPO
  (:data:`SAVED_ATTRIBUTES`: an ``"env": "pkg:Env-v0"`` entry would make SB3 import ``pkg`` and
  build that env), and every pickled entry is rebuilt from what dream_gym knows and handed to SB3
  as ``custom_objects``, so SB3 unpickles none of them:

  - ``policy_class``: the class the pickle names (read by :mod:`pickletools`, which parses the
    opcodes and calls nothing) must be one the architectures of :mod:`dream_gym.rl.archs` train
    (:data:`POLICY_CLASSES`); it also decides the algorithm (MaskablePPO or PPO);
  - ``observation_space``, ``action_space``: a Box, a Discrete or a Dict of Boxes, built from the
    readable fields SB3 writes beside the pickle (dtype, shape and bounds; n and start);
  - ``lr_schedule``, ``clip_range``: constants, from the readable ``ConstantSchedule(val=...)``,
    or from the run's own config when training resumes (``constants``);
  - ``rollout_buffer_class``: left to SB3, which picks the buffer of the algorithm and the
    observation as it does for a new model;
  - ``_last_obs``, ``_last_episode_starts``, ``ep_info_buffer``, ``ep_success_buffer``: training
    state, dropped (training that goes on resets its envs, as ``load(env=...)`` always did, and
    starts new episode statistics for its logs);
* ``policy_kwargs`` may hold layer sizes only (``net_arch``, ``hidden``), ``rollout_buffer_kwargs``
  nothing: both go to constructors.

A zip that needs anything else is refused with :class:`UntrustedModelError`, naming the entry.
``trust_model=True`` (``--trust-model`` on the commands) loads it the old way, unpickling what it
holds: for a model whose author you trust. :func:`trusted_models` does the same for the loads of
a block of code (those made through a policy spec, such as ``load_policy("model.zip")``).

:func:`check_model_zip` runs every check that needs no torch (all but those of the ``.pth``
entries), so a parent process can refuse a zip before its workers load it.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import contextvars
import importlib
import io
import json
import os
import pickletools
import re
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium.spaces import Box, Dict, Discrete, MultiDiscrete, Space

from dream_gym.infrastructure.printable import printable
from dream_gym.rl.acting_model import load_to_act

#: The entries stable-baselines3 2.x writes into a model zip; a zip with any other is refused.
SB3_ENTRIES = frozenset({"data", "policy.pth", "policy.optimizer.pth", "pytorch_variables.pth",
                         "_stable_baselines3_version", "system_info.txt"})

#: The model attribute that records its architecture (dream_gym.rl.archs), saved in ``data``.
ARCH_ATTRIBUTE = "dream_gym_arch"

#: What ``model.save`` of a PPO or MaskablePPO model (SB3 2.9) writes into ``data``, and the
#: attribute recording the architecture: the only entries ``data`` may hold.
SAVED_ATTRIBUTES = frozenset({
    "policy_class", "policy_kwargs", "observation_space", "action_space", "lr_schedule", "learning_rate",
    "verbose", "seed", "start_time", "num_timesteps", "_total_timesteps", "_num_timesteps_at_start", "_n_updates",
    "_current_progress_remaining", "_episode_num", "_stats_window_size", "tensorboard_log", "action_noise",
    "use_sde", "sde_sample_freq", "_last_obs", "_last_episode_starts", "_last_original_obs", "ep_info_buffer",
    "ep_success_buffer", "n_envs", "n_steps", "batch_size", "n_epochs", "gamma", "gae_lambda", "ent_coef",
    "vf_coef", "max_grad_norm", "clip_range", "clip_range_vf", "normalize_advantage", "target_kl",
    "rollout_buffer_class", "rollout_buffer_kwargs", ARCH_ATTRIBUTE,
})

#: The policy classes a zip may name, (module, name) -> algorithm: those the architectures of
#: :data:`dream_gym.rl.archs.ARCHITECTURES` train with (SB3's ``MlpPolicy`` of each algorithm for
#: macro and options, the node scorer's policies for node, and SB3's ``MultiInputPolicy`` a user
#: trains on the node env with SB3 itself). An architecture with a policy class
#: of its own adds it here (a test checks that every architecture's network is one of these).
POLICY_CLASSES: dict[tuple[str, str], str] = {
    ("sb3_contrib.common.maskable.policies", "MaskableActorCriticPolicy"): "maskable-ppo",
    ("stable_baselines3.common.policies", "ActorCriticPolicy"): "ppo",
    ("dream_gym.rl.node_policy", "MaskableNodePolicy"): "maskable-ppo",
    ("dream_gym.rl.node_policy", "NodePolicy"): "ppo",
    # SB3's own network for Dict observations ("MultiInputPolicy"), trained on DreamGym/Node-v0
    ("sb3_contrib.common.maskable.policies", "MaskableMultiInputActorCriticPolicy"): "maskable-ppo",
    ("stable_baselines3.common.policies", "MultiInputActorCriticPolicy"): "ppo",
}

#: Pickled training state: dropped (None) when a zip is loaded as data.
TRAINING_STATE = ("_last_obs", "_last_episode_starts", "ep_info_buffer", "ep_success_buffer")
#: Pickled schedules rebuilt as constants.
SCHEDULES = ("lr_schedule", "clip_range")
#: Pickled entries dream_gym rebuilds (every other pickled entry is refused).
REBUILT = frozenset({"policy_class", "observation_space", "action_space", "rollout_buffer_class",
                     *SCHEDULES, *TRAINING_STATE})
#: What ``policy_kwargs`` may hold: layer sizes (macro and options: ``net_arch``; node: ``hidden``).
POLICY_KWARGS = frozenset({"net_arch", "hidden"})

_TRUST_HINT = ("dream-gym loads model zips as data only; if you trust the author of this one, pass --trust-model "
               "(Python: trust_model=True) to load it with the objects pickled in it, which run as code")
_NUMERIC_KINDS = "biuf"  # dtypes a Box may have: bool, integers, floats
_MAX_ELEMENTS = 10_000_000  # a Box printed with uniform bounds could otherwise ask for any memory
_DATA_MAX_BYTES = 64 << 20  # SB3's data entry: JSON of the settings and spaces (kilobytes)
_WEIGHTS_MAX_BYTES = 2 << 30  # a .pth entry: the weights
_MAX_PACKED_RATIO, _RATIO_FLOOR_BYTES = 50, 16 << 20  # past 16 MB, what unpacks 50-fold is no model
_CONSTANT = re.compile(r"ConstantSchedule\(val=([-+0-9.eE]+|inf|-inf)\)")
_BOX_ITEM = re.compile(r"'([A-Za-z_][A-Za-z0-9_]*)': Box\(([-+0-9.eEinf]+), ([-+0-9.eEinf]+), \(([0-9, ]*)\), ([a-z0-9]+)\)")
_NO_OBJECT = ("PROTO", "FRAME", "MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT", "STOP")  # framing and memo opcodes
_TRUSTED: contextvars.ContextVar[bool] = contextvars.ContextVar("dream_gym_trusted_models", default=False)


class UntrustedModelError(ValueError):
    """A model zip holds something dream-gym does not load as data (the message names it)."""


@contextlib.contextmanager
def trusted_models(trust: bool = True) -> Iterator[None]:
    """Within the block (``trust=True``), model zips load the old way, their pickled objects
    unpickled, as with ``trust_model=True``: for loads made through a policy spec, such as
    ``dream_gym.policy_files.load_policy("model.zip")``. ``trust=False`` changes nothing."""
    if not trust:
        yield
        return
    token = _TRUSTED.set(True)
    try:
        yield
    finally:
        _TRUSTED.reset(token)


def models_trusted() -> bool:
    """Whether this code runs inside :func:`trusted_models`."""
    return _TRUSTED.get()


# --------------------------------------------------------------------------- reading a zip as data


@dataclass(frozen=True)
class ModelZip:
    """What a model zip holds, read as data and checked.

    Attributes:
        label: how messages name the zip (its path).
        data: the ``data`` entry, as JSON.
        policy: (module, name) of its policy class, one of :data:`POLICY_CLASSES`.
        spaces: the observation and action spaces, rebuilt.
        constants: the schedules' constants (``lr_schedule``, ``clip_range``) it records.
        weights: the ``.pth`` entries (bytes) by name.
    """

    label: str
    data: dict[str, Any]
    policy: tuple[str, str]
    spaces: dict[str, Space[Any]]
    constants: dict[str, float]
    weights: dict[str, bytes]

    def policy_class(self) -> type:
        """The policy class (imported from its module, one of dream_gym's or SB3's)."""
        module, name = self.policy
        return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]

    def custom_objects(self, constants: Mapping[str, float] | None = None) -> dict[str, Any]:
        """SB3's ``custom_objects`` for this zip: every pickled entry, rebuilt (``constants``:
        ``learning_rate`` and ``clip_range`` that replace the zip's, from a run's config)."""
        from stable_baselines3.common.utils import FloatSchedule

        objects: dict[str, Any] = {"policy_class": self.policy_class(), **self.spaces}
        values = dict(self.constants)
        if constants:
            values.update(lr_schedule=constants["learning_rate"], clip_range=constants["clip_range"])
            objects["learning_rate"] = constants["learning_rate"]
        objects.update({name: FloatSchedule(value) for name, value in values.items()})
        for name in ("rollout_buffer_class", *TRAINING_STATE):
            if name in self.data:
                objects[name] = None
        return objects


def read_model_zip(blob: bytes, label: str) -> ModelZip:
    """The zip ``blob`` (named ``label`` in messages) read as data, every entry checked;
    :class:`UntrustedModelError` naming the first one that is not data dream_gym rebuilds."""
    entries = _zip_entries(blob, label)
    data = _data_json(entries["data"], label)
    for key, value in data.items():
        _check_entry(key, value, label)
    if "policy_class" not in data:
        raise _refused(label, "its data names no policy class")
    return ModelZip(
        label=label,
        data=data,
        policy=_policy_reference(data["policy_class"], label),
        spaces={name: _space(name, data.get(name), label) for name in ("observation_space", "action_space")},
        constants={name: _constant(name, data[name], label) for name in SCHEDULES if _pickled(data.get(name))},
        weights={name: raw for name, raw in entries.items() if name.endswith(".pth")},
    )


def check_model_zip(path: str | os.PathLike[str]) -> ModelZip:
    """What the zip at ``path`` holds, read as data; :class:`UntrustedModelError` if it holds
    anything :func:`load_model_zip` would refuse, but for the checks of the ``.pth`` entries
    (they need torch). Imports neither torch nor SB3."""
    return read_model_zip(_read_bytes(path), os.fspath(path))


def _read_bytes(path: str | os.PathLike[str]) -> bytes:
    if not os.path.isfile(path):
        raise FileNotFoundError(f"model file {os.fspath(path)} does not exist")
    return Path(path).read_bytes()


def _refused(label: str, what: str) -> UntrustedModelError:
    return UntrustedModelError(f"model {label}: {what}; {_TRUST_HINT}")


def _zip_entries(blob: bytes, label: str) -> dict[str, bytes]:
    """The entries of the zip by name (all but the two text files); only SB3's, with ``data`` and
    ``policy.pth`` among them."""
    try:
        with zipfile.ZipFile(io.BytesIO(blob)) as archive:
            names = archive.namelist()
            extra = [name for name in names if name not in SB3_ENTRIES]
            if extra:
                raise _refused(label, f"it holds the file {printable(extra[0])!r}, which stable-baselines3 does not "
                                      f"write (a model zip holds {', '.join(sorted(SB3_ENTRIES))})")
            for needed in ("data", "policy.pth"):
                if needed not in names:
                    raise ValueError(f"model {label} is no stable-baselines3 model: it has no {needed} entry")
            wanted = [name for name in names if name == "data" or name.endswith(".pth")]
            for name in wanted:
                _check_unpacked_size(archive.getinfo(name), label)
            return {name: archive.read(name) for name in wanted}  # each at most its declared size
    except zipfile.BadZipFile:
        raise ValueError(f"model {label} is not a zip file (a stable-baselines3 model is one)") from None


def _check_unpacked_size(info: zipfile.ZipInfo, label: str) -> None:
    """Refuse an entry that would unpack to more than a model holds: SB3's ``data`` (JSON) is
    kilobytes, weights do not compress (a bomb does: 600 MB from 600 KB)."""
    limit = _DATA_MAX_BYTES if info.filename == "data" else _WEIGHTS_MAX_BYTES
    packed_ratio = info.file_size / max(1, info.compress_size)
    if info.file_size > limit or (info.file_size > _RATIO_FLOOR_BYTES and packed_ratio > _MAX_PACKED_RATIO):
        raise _refused(label, f"its {printable(info.filename)!r} entry would unpack to {info.file_size:,} bytes "
                              f"from {info.compress_size:,} (a model's holds at most {limit:,}, and weights "
                              f"do not compress {_MAX_PACKED_RATIO}-fold)")


def _data_json(raw: bytes, label: str) -> dict[str, Any]:
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ValueError(f"model {label}: its data entry is not JSON") from None
    if not isinstance(data, dict):
        raise ValueError(f"model {label}: its data entry is not a JSON object")
    return data


def _pickled(value: Any) -> bool:
    return isinstance(value, dict) and ":serialized:" in value


def _check_entry(key: str, value: Any, label: str) -> None:
    """One entry of ``data``: an attribute SB3 saves; pickled only where dream_gym rebuilds it;
    the constructor arguments (policy_kwargs, rollout_buffer_kwargs) data that fits them."""
    if key not in SAVED_ATTRIBUTES:
        raise _refused(label, f"its data entry {printable(key)!r} is not an attribute stable-baselines3 saves for PPO")
    if _pickled(value) and key not in REBUILT:
        kind = printable(value.get(":type:", "an object"), 80)
        raise _refused(label, f"its data entry {key!r} is a pickled {kind}, which dream-gym does not rebuild")
    if key == "policy_kwargs" and not _policy_kwargs(value):
        raise _refused(label, f"its data entry 'policy_kwargs' holds {printable(value, 120)}; dream-gym rebuilds "
                              f"layer sizes only ({', '.join(sorted(POLICY_KWARGS))})")
    if key == "rollout_buffer_kwargs" and value not in (None, {}):
        raise _refused(label, f"its data entry 'rollout_buffer_kwargs' holds {printable(value, 120)}, not nothing")


def _policy_kwargs(value: Any) -> bool:
    return isinstance(value, dict) and all(key in POLICY_KWARGS and _sizes(size) for key, size in value.items())


def _sizes(value: Any) -> bool:
    """A layer size, a list of them, or a dict of such lists (``{"pi": [64, 64], "vf": [64, 64]}``)."""
    if isinstance(value, dict):
        return all(isinstance(key, str) and _layer_list(sizes) for key, sizes in value.items())
    return _layer_list(value) or _layer_size(value)


def _layer_list(value: Any) -> bool:
    return isinstance(value, list) and all(_layer_size(size) for size in value)


def _layer_size(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


# --------------------------------------------------------------------------- the pickled entries, rebuilt


def class_reference(pickle_bytes: bytes) -> tuple[str, str] | None:
    """(module, name) when ``pickle_bytes`` is one reference to a global and nothing else (how
    cloudpickle writes an importable class), else None. Read with :func:`pickletools.genops`,
    which parses the opcodes and never imports or calls anything."""
    steps: list[tuple[str, Any]] = []
    try:
        for opcode, argument, _ in pickletools.genops(pickle_bytes):
            if opcode.name not in _NO_OBJECT:
                steps.append((opcode.name, argument))
    except (ValueError, EOFError):  # not a whole pickle
        return None
    names = [name for name, _ in steps]
    if names == ["GLOBAL"]:  # protocols 0 to 3: "module name"
        module, _, name = str(steps[0][1]).partition(" ")
        return module, name
    strings = ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE")
    if len(names) == 3 and names[0] in strings and names[1] in strings and names[2] == "STACK_GLOBAL":
        return str(steps[0][1]), str(steps[1][1])
    return None


def _policy_reference(entry: Any, label: str) -> tuple[str, str]:
    """The (module, name) the pickled policy class names, if it is one of :data:`POLICY_CLASSES`."""
    reference = None
    if _pickled(entry):
        with contextlib.suppress(binascii.Error, ValueError, TypeError):
            reference = class_reference(base64.b64decode(entry[":serialized:"], validate=True))
    if reference is None:
        raise _refused(label, "its data entry 'policy_class' is not a plain reference to a class: unpickling it "
                              "would run the program it holds")
    if reference not in POLICY_CLASSES:
        known = ", ".join(f"{module}.{name}" for module, name in POLICY_CLASSES)
        raise _refused(label, f"its data entry 'policy_class' names {printable('.'.join(reference), 120)}, which is "
                              f"not a policy class of dream-gym's architectures ({known})")
    return reference


def _space(name: str, entry: Any, label: str) -> Space[Any]:
    """A Box, Discrete or Dict of Boxes, from the readable fields SB3 writes beside its pickle."""
    if not _pickled(entry):
        raise _refused(label, f"its data entry {name!r} is not a space as stable-baselines3 writes one")
    kind = entry.get(":type:")
    if kind == "<class 'gymnasium.spaces.box.Box'>" and name == "observation_space" and "..." in (
            str(entry.get("low")) + str(entry.get("high"))):
        # numpy shortens the bounds of a Box past 1,000 values: larger than the observation of
        # any model dream-gym runs, so no trust would make it run here
        raise UntrustedModelError(
            f"model {label}: its observation is a Box of shape {printable(entry.get('_shape'), 40)}, larger than "
            "that of any model dream-gym runs (the replay env's Dict, or the observation of a model dream-gym "
            "train makes): one trained on a wrapped env (FlattenObservation, a feature set of your own) runs in "
            "your own loop over that wrapped env, not in eval")
    reason = ""
    try:
        if kind == "<class 'gymnasium.spaces.box.Box'>":
            return _box(entry["_shape"], entry["dtype"], entry["low"], entry["high"])
        if kind == "<class 'gymnasium.spaces.discrete.Discrete'>":
            return Discrete(int(entry["n"]), start=int(entry["start"]))
        if kind == "<class 'gymnasium.spaces.multi_discrete.MultiDiscrete'>":
            return _multi_discrete(entry["_shape"], entry["dtype"], entry["nvec"], entry["start"])
        if kind == "<class 'gymnasium.spaces.dict.Dict'>":
            try:
                return _dict_of_boxes(entry["spaces"])
            except ValueError:
                return _replay_observation_space(entry["spaces"])
    except (KeyError, TypeError, ValueError) as exc:
        reason = f"{type(exc).__name__}: {exc}"
    if reason:  # a kind it reads, whose fields do not give it (a large Box's bounds are printed shortened)
        raise _refused(label, f"its data entry {name!r} ({printable(kind, 80)}) is not given whole by the readable "
                              f"fields beside its pickle ({printable(reason, 120)})")
    raise _refused(label, f"its data entry {name!r} ({printable(kind, 80)}) is not a Box, Discrete, MultiDiscrete, "
                          "Dict of Boxes or the replay env's observation whose readable fields give it whole")


def _dtype(name: Any) -> np.dtype[Any]:
    dtype = np.dtype(str(name))
    if dtype.kind not in _NUMERIC_KINDS:
        raise ValueError(f"not a numeric dtype: {name}")
    return dtype


def _box(shape: Any, dtype_name: Any, low: Any, high: Any) -> Box:
    """A Box from its shape (a JSON list), dtype and bounds (numpy's printout of whole arrays)."""
    if not (isinstance(shape, list) and all(isinstance(n, int) and n >= 0 for n in shape)):
        raise ValueError(f"not a shape: {shape}")
    dtype = _dtype(dtype_name)
    return Box(_array(low, shape, dtype), _array(high, shape, dtype), tuple(shape), dtype)


def _array(printed: Any, shape: list[int], dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """An array from numpy's printout of it ('[-1. -1.\\n -1.]'); a shortened one ('...') fails."""
    if not isinstance(printed, str) or "..." in printed:
        raise ValueError("bounds not given whole")
    values = np.array([float(word) for word in printed.replace("[", " ").replace("]", " ").split()])
    return values.reshape(shape).astype(dtype)


def _dict_of_boxes(printed: Any) -> Dict:
    """A Dict from its printout ``{'a': Box(-1.0, 1.0, (3,), float32), ...}`` (uniform bounds)."""
    if not isinstance(printed, str):
        raise ValueError("no printout")
    items = list(_BOX_ITEM.finditer(printed))
    if printed != "{" + ", ".join(item.group(0) for item in items) + "}" or not items:
        raise ValueError("not a dict of Boxes with uniform bounds")
    boxes: dict[str, Space[Any]] = {}
    for item in items:
        key, low, high, shape, dtype = item.groups()
        size = tuple(int(n) for n in shape.split(",") if n.strip())
        if int(np.prod(size)) > _MAX_ELEMENTS:
            raise ValueError(f"a Box of {size} is larger than any model dream-gym trains")
        boxes[key] = Box(float(low), float(high), size, _dtype(dtype))
    return Dict(boxes)


def _multi_discrete(shape: Any, dtype_name: Any, nvec: Any, start: Any) -> MultiDiscrete:
    """A MultiDiscrete from its shape (a JSON list), dtype and nvec and start (numpy's printouts)."""
    if not (isinstance(shape, list) and len(shape) == 1 and isinstance(shape[0], int) and 0 < shape[0] <= 1024):
        raise ValueError(f"not a one-dimensional MultiDiscrete shape: {shape}")
    dtype = _dtype(dtype_name)
    return MultiDiscrete(_array(nvec, shape, dtype), dtype=dtype, start=_array(start, shape, dtype))


_REPLAY_NODES = re.compile(r"'nodes': Box\(.*, \((\d+), 5\), int32\)", re.DOTALL)


def _replay_observation_space(printed: Any) -> Dict:
    """The replay env's observation space (``DreamGym/Replay-v1``, a model a user trained with
    SB3 on it): numpy shortens the printout of its node bounds, so it is rebuilt from its capacity
    and W and accepted only when its printout is the one the zip holds, to the letter."""
    from dream_gym.envs.spaces import observation_space

    found = _REPLAY_NODES.search(printed) if isinstance(printed, str) else None
    if found is None or not 0 < int(found.group(1)) <= 100_000:
        raise ValueError("not the replay env's observation")
    for workers in range(1, 257):
        space = observation_space(int(found.group(1)), workers)
        if str(space.spaces) == printed:
            return space
    raise ValueError("not the replay env's observation at any W")


def _constant(name: str, entry: dict[str, Any], label: str) -> float:
    """The constant of a pickled FloatSchedule(ConstantSchedule(val=x)), from its readable field."""
    found = _CONSTANT.fullmatch(str(entry.get("value_schedule", "")))
    if entry.get(":type:") != "<class 'stable_baselines3.common.utils.FloatSchedule'>" or found is None:
        raise _refused(label, f"its data entry {name!r} is not a constant schedule (dream-gym rebuilds "
                              "ConstantSchedule only)")
    return float(found.group(1))


# --------------------------------------------------------------------------- loading


def load_model_zip(path: str | os.PathLike[str], *, trust: bool = False, env: Any = None,
                   policy_class: type | None = None, constants: Mapping[str, float] | None = None,
                   to_act: bool = False) -> Any:
    """The MaskablePPO or PPO model of an SB3 zip, on the CPU.

    Args:
        path: the zip.
        trust: load it the old way, with the objects pickled in it (they run as code); also
            True inside :func:`trusted_models`. Default: as data (module docstring), or
            :class:`UntrustedModelError` naming what is not.
        env: the env training goes on in (SB3's ``load(env=...)``: its spaces must match).
        policy_class: the policy class the zip must name (a resumed run's own).
        constants: ``learning_rate`` and ``clip_range`` replacing the zip's (a resumed run's config).
        to_act: the model only predicts: its optimizer is not built
            (:mod:`dream_gym.rl.acting_model`; building it costs a second a process).
    """
    if trust or models_trusted():
        return _load_pickled(path, env, to_act)
    blob = _read_bytes(path)
    contents = read_model_zip(blob, os.fspath(path))
    _check_weights(contents)
    found = contents.policy_class()
    if policy_class is not None and found is not policy_class:
        raise _refused(contents.label, f"its policy class is {found.__name__}, not this run's "
                                       f"{policy_class.__name__}")
    try:  # SB3 reads the same bytes that were checked (a file swapped since cannot slip anything in)
        return _sb3_load(_algorithm(found), io.BytesIO(blob), env, contents.custom_objects(constants),
                         contents.data.get("policy_kwargs"), to_act)
    except (AssertionError, AttributeError, KeyError, RuntimeError, TypeError, ValueError) as exc:
        # data of the wrong shape or type (weights of another network, a string for a number)
        raise ValueError(f"model {contents.label} does not load: {type(exc).__name__}: "
                         f"{printable(exc, 500, lines=True)}") from exc


def _algorithm(policy_class: Any) -> Any:
    """MaskablePPO for a maskable policy class, else PPO."""
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
    from stable_baselines3 import PPO

    return MaskablePPO if isinstance(policy_class, type) and issubclass(policy_class, MaskableActorCriticPolicy) else PPO


def _check_weights(contents: ModelZip) -> None:
    """Every ``.pth`` entry loads with ``weights_only=True``, whatever the SB3 version that loads it
    next; ``pytorch_variables.pth`` holds no variable (PPO saves none; SB3 sets each by name)."""
    import torch

    for name, raw in contents.weights.items():
        try:
            loaded = torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
        except Exception as exc:  # torch raises many kinds on a bad or refused file
            first = printable(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, 200)
            raise _refused(contents.label, f"its {name} is not plain tensors ({first})") from None
        if name == "pytorch_variables.pth" and loaded not in (None, {}):
            names = list(loaded) if isinstance(loaded, dict) else [type(loaded).__name__]
            raise _refused(contents.label, f"its pytorch_variables.pth holds {printable(names, 120)}, and PPO saves none")


def _load_pickled(path: str | os.PathLike[str], env: Any, to_act: bool) -> Any:
    """The old way: SB3 unpickles the zip's objects (once: handed back to ``load`` as custom_objects)."""
    from stable_baselines3.common.save_util import load_from_zip_file

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"model file {path} does not exist")
    try:
        data, _, _ = load_from_zip_file(path, device="cpu")
        data = data or {}
        return _sb3_load(_algorithm(data.get("policy_class")), path, env, data, data.get("policy_kwargs"), to_act)
    except Exception as exc:  # noqa: BLE001 - anything SB3 or the zip's own objects raise: a zip that does not load
        # (a zip of other files: AssertionError "No data found"; weights that are no tensors: an
        # unpickling error; a damaged entry: "Incorrect padding"), named once instead of a traceback
        raise ValueError(f"model {path} does not load with --trust-model: {type(exc).__name__}: "
                         f"{printable(exc, 500, lines=True)}") from exc


def _sb3_load(algorithm: Any, source: Any, env: Any, objects: Mapping[str, Any],
              policy_kwargs: Mapping[str, Any] | None, to_act: bool) -> Any:
    """SB3's ``algorithm.load`` of ``source`` on the CPU with ``objects`` as its custom objects;
    ``to_act``: without building the optimizer (:func:`~dream_gym.rl.acting_model.load_to_act`)."""
    def load(more: Mapping[str, Any]) -> Any:
        return algorithm.load(source, env=env, device="cpu", custom_objects={**objects, **more})

    return load_to_act(load, policy_kwargs) if to_act else load({})


__all__ = ["ARCH_ATTRIBUTE", "POLICY_CLASSES", "SAVED_ATTRIBUTES", "SB3_ENTRIES", "ModelZip", "UntrustedModelError",
           "check_model_zip", "class_reference", "load_model_zip", "models_trusted", "read_model_zip",
           "trusted_models"]
