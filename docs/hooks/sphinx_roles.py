"""MkDocs hook: docstrings cross-reference with Sphinx roles (``:class:`Name```), which Markdown
renders as the role's name before a code span; the generated pages show the code span alone."""

from __future__ import annotations

import re

ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj|py:\w+):(?=<code>)")


def on_page_content(html: str, **kwargs: object) -> str:
    return ROLE.sub("", html)
