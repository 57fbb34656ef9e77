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
