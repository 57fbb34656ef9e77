"""The optional dependencies (jax, Dask, Optuna) are imported in one place,
src/xlarank/compat.py, read from the source (every import statement, those inside
functions too), as LightGBM's compat.py holds them:

- no other module imports jax, jaxlib, dask, distributed or optuna, in any form (``import
  x``, ``import x.y``, ``from x import ...``, at any depth);
- the modules that compute with jax take compat's stand-ins (``from xlarank.compat import
  jax, jnp`` or `jax_module`) once, at their top, and are the declared ones below;
- importing every module of the package loads none of these packages (the stand-ins
  import jax at their first use), so the laziness holds however the modules import one
  another.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest

from helpers import package_modules

OPTIONAL = ("jax", "jaxlib", "dask", "distributed", "optuna")
COMPAT = "xlarank.compat"
# compat's names standing in for jax and its modules.
STAND_INS = frozenset({"jax", "jnp", "jax_module"})
# The modules that compute with jax: each takes compat's stand-ins at its top.
JAX_MODULES = frozenset({
    "xlarank.features.gnn_train",
    "xlarank.features.gru_train",
    "xlarank.features.jax_common",
    "xlarank.measure",
    "xlarank.measure.trace",
    "xlarank.systems.competition_gnn.model",
    "xlarank.systems.competition_gnn.system",
    "xlarank.systems.inner",
    "xlarank.systems.tpugraphs_gnn.model",
    "xlarank.systems.tpugraphs_gnn.system",
    "xlarank.systems.tpugraphs_gnn.train",
})


def optional_imports(tree: ast.Module) -> list[tuple[int, str, bool]]:
    """(line, package, at the module's top) of every import of an optional package."""
    top = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            package = name.split(".")[0]
            if package in OPTIONAL:
                found.append((node.lineno, package, id(node) in top))
    return found


def stand_in_imports(tree: ast.Module) -> list[tuple[int, bool]]:
    """(line, at the module's top) of every import of compat's stand-ins."""
    top = {id(node) for node in tree.body}
    return [(node.lineno, id(node) in top) for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == COMPAT
            and STAND_INS & {a.name for a in node.names}]


def offences(module: str, source: str) -> list[str]:
    """What breaks the rules in one module's source."""
    if module == COMPAT:
        return []
    tree = ast.parse(source)
    out = [f"{module}:{line}: imports {package}" + ("" if top else " inside a function")
           for line, package, top in optional_imports(tree)]
    for line, top in stand_in_imports(tree):
        if not top:
            out.append(f"{module}:{line}: takes jax from compat inside a function, not at "
                       "its top")
        elif module not in JAX_MODULES:
            out.append(f"{module}:{line}: takes jax from compat but is not in JAX_MODULES")
    return out


def test_optional_packages_are_imported_in_compat_only():
    found = [o for module, path in package_modules().items()
             for o in offences(module, path.read_text())]
    assert found == [], "\n".join(found)


def test_the_declared_jax_modules_take_jax_at_their_top():
    mods = package_modules()
    assert JAX_MODULES <= set(mods)
    missing = [m for m in sorted(JAX_MODULES)
               if not any(top for _, top in stand_in_imports(ast.parse(mods[m].read_text())))]
    assert missing == []


@pytest.mark.parametrize("source, what", [
    ("def f():\n    import jax\n", "imports jax inside a function"),
    ("def f():\n    import jax.numpy as jnp\n", "imports jax inside a function"),
    ("def f():\n    from jax.experimental import layout\n", "imports jax inside a function"),
    ("import jaxlib\n", "imports jaxlib"),
    ("class A:\n    def f(self):\n        from dask import array\n", "imports dask"),
    ("import distributed.client\n", "imports distributed"),
    ("from optuna import trial\n", "imports optuna"),
    ("def f():\n    from xlarank.compat import jnp\n", "inside a function, not at its top"),
    ("from xlarank.compat import jax\n", "not in JAX_MODULES"),
])
def test_the_scan_catches(source, what):
    found = offences("xlarank.somewhere", source)
    assert len(found) == 1 and what in found[0], found


@pytest.mark.parametrize("source", [
    "import jaxtyping\nfrom xlarank.compat import require_jax\n",
    "from . import jax_common\nimport xlarank.features.jax_common\n",
    "def f():\n    from xlarank.compat import require_jax\n    require_jax()\n",
])
def test_the_scan_lets_pass(source):
    assert offences("xlarank.somewhere", source) == []


@pytest.mark.slow  # a fresh interpreter imports every module
def test_importing_every_module_loads_no_optional_package():
    """In a fresh interpreter: every module of the package imported (the CLI's entry
    point, __main__, aside: it runs the CLI), then none of the optional packages is in
    sys.modules."""
    names = sorted(m for m in package_modules() if m != "xlarank.__main__")
    probe = ("import importlib, json, sys\n"
             f"for name in {names!r}:\n"
             "    importlib.import_module(name)\n"
             f"print(json.dumps([m for m in {list(OPTIONAL)!r} if m in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
