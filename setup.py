"""Which packages and package data the wheel holds (everything else is in pyproject.toml).

The code: every package of dream_gym/. The shipped data (datasets, trained models, prompt templates)
as package data, mapped onto the repository's folders, so the repository keeps its layout and an
editable install (``pip install -e .``) reads them in place. In a wheel they land in
``dream_gym/_shipped/`` (same layout), a folder without ``__init__.py``: the sandbox never lets
untrusted code read it (``read_roots`` in dream_gym/infrastructure/sandbox/launch.py). dream_gym/world/shipped.py finds
them, in a wheel or in a checkout.
"""

from setuptools import find_packages, setup

SHIPPED = {
    "dream_gym._shipped.recorded_worlds": "recorded_worlds",
    "dream_gym._shipped.agents.models": "agents/models",
    "dream_gym._shipped.agents.prompts": "agents/prompts",
}
PACKAGE_DATA = {
    "dream_gym": ["py.typed"],
    # each dataset's dataset.json and cards, each world's files; not the build scripts beside them
    "dream_gym._shipped.recorded_worlds": ["*/dataset.json", "*/*.md", "*/*/*.json", "*/*/*.jsonl",
                                           "*/*/*.jsonl.gz"],
    "dream_gym._shipped.agents.models": ["*.zip", "README.md"],
    "dream_gym._shipped.agents.prompts": ["*.md"],
}

setup(packages=[*find_packages(include=["dream_gym", "dream_gym.*"]), *SHIPPED], package_dir=SHIPPED,
      package_data=PACKAGE_DATA)
