"""actors.ray is optional: `import actors` never imports Ray, and without Ray it says what to do."""

from __future__ import annotations

import subprocess
import sys

import actors.ray


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_importing_actors_does_not_import_ray() -> None:
    done = _python("import sys, actors; print('ray' in sys.modules)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_without_ray_the_runtime_says_how_to_install_it() -> None:
    code = (
        "import sys\n"
        "sys.modules['ray'] = None  # as if it were not installed\n"
        "from actors.ray import RayRuntime\n"
        "from actors.exceptions import UserError\n"
        "try:\n"
        "    RayRuntime()\n"
        "except UserError as exc:\n"
        "    print(exc)\n"
    )
    done = _python(code)
    assert done.returncode == 0, done.stderr
    assert "pip install 'actors[ray]'" in done.stdout


def test_the_public_names_are_sorted_and_resolve() -> None:
    names = actors.ray.__all__
    assert names == sorted(names, key=str.lower)
    assert all(getattr(actors.ray, name, None) is not None for name in names)
