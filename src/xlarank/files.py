"""Reading the small TOML and JSON files users hand to xlarank, with one-line errors."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from xlarank.errors import XlarankError


def read_structured(path: str | Path, what: str, error: type[XlarankError] = XlarankError,
                    missing_hint: str = "") -> object:
    """Parse a .toml or .json file (by suffix); ``what`` names it in error messages."""
    path = Path(path)
    toml = path.suffix == ".toml"
    try:
        text = path.read_text()
        return tomllib.loads(text) if toml else json.loads(text)
    except FileNotFoundError:
        raise error(f"{path}: {what} not found{missing_hint}") from None
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise error(f"{path}: {what} is not valid {'TOML' if toml else 'JSON'} ({exc})") from None
    except OSError as exc:
        raise error(f"{path}: {what} cannot be read ({exc.strerror})") from None


def toml_text(table: dict, header: str = "") -> str:
    """A flat TOML document: scalar keys, then one level of sub-tables (such as a booster
    spec's [params]). ``header`` lines become comments at the top."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    scalars = {k: v for k, v in table.items() if not isinstance(v, dict)}
    tables = {k: v for k, v in table.items() if isinstance(v, dict)}
    lines += [f"{k} = {_toml_value(v)}" for k, v in scalars.items()]
    for name, sub in tables.items():
        lines += ["", f"[{name}]"] + [f"{k} = {_toml_value(v)}" for k, v in sub.items()]
    return "\n".join(lines) + "\n"


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        # repr keeps every digit; TOML floats need a point or exponent, ints must not have one.
        return repr(float(value)) if isinstance(value, float) else str(int(value))
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")
