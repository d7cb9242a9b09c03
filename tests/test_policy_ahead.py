"""What a policy file's template imports ahead: parsed from the file, never run."""

from __future__ import annotations

from dream_gym.policy_files.ahead import Named, named_in


def test_every_import_statement_and_literal_import_call_is_named() -> None:
    named = named_in(b"import heapq\n"
                     b"from collections import deque as dq\n"
                     b"def f():\n    import statistics\n"
                     b"importlib.import_module('bisect')\n__import__('fractions')\n"
                     b"importlib.import_module('x' + 'y')\n")
    assert named.modules == ["heapq", "collections", "collections.deque", "statistics", "bisect", "fractions"]


def test_modules_that_act_when_imported_are_not_named() -> None:
    assert named_in(b"import this\nimport antigravity\nimport json.__main__\nfrom a.__main__ import b\n").modules == []


def test_attribute_chains_are_named_from_the_module_each_import_binds() -> None:
    named = named_in(b"import numpy as np\nimport os.path\nfrom scipy import stats as st\n"
                     b"x = np.random.default_rng(0)\ny = os.path.join\nz = st.norm.cdf\nw = other.attr\n")
    assert ("numpy", ("random",)) in named.attributes
    assert ("numpy", ("random", "default_rng")) in named.attributes
    assert ("os", ("path", "join")) in named.attributes
    assert ("scipy.stats", ("norm", "cdf")) in named.attributes
    assert not any(module == "other" for module, _ in named.attributes)


def test_a_file_that_does_not_parse_names_nothing() -> None:
    assert named_in(b"def (:\n") == Named()


def test_a_modules_deferred_imports_are_its_indented_import_statements() -> None:
    import collections
    import json.decoder

    from dream_gym.policy_files.ahead import _deferred_imports

    assert {"heapq", "copy"} <= set(_deferred_imports(collections))  # Counter.most_common, UserDict.copy
    assert "json" not in _deferred_imports(json.decoder) and "json.scanner" not in _deferred_imports(json.decoder)
