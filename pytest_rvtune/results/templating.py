"""The Jinja2 environment of the report's templates (``results/templates/``): the HTML page (html.py) and its SVG
charts (svg.py). Autoescape is on, so every string a template writes is escaped unless it arrives as markup the
package made; an undefined name is an error, never an empty string. Nothing here knows pytest."""

from __future__ import annotations

from functools import cache

from jinja2 import Environment, PackageLoader, StrictUndefined


@cache
def environment() -> Environment:
    return Environment(loader=PackageLoader("pytest_rvtune.results", "templates"), autoescape=True,
                       undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
