"""Which heavy modules a CLI run imports, checked in a fresh interpreter."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY_PACKAGES = ("tensorrt", "tensorrt_rtx_bindings", "cuda", "polygraphy", "network", "plugin")


def heavy_modules_imported_by(cli_args: list[str], packages: tuple[str, ...] = HEAVY_PACKAGES) -> list[str]:
    """Runs aliased_io_plugin.main(cli_args) in a new process (it must exit 0); returns the `packages` modules it loaded."""
    code = (
        f"import json, sys; import aliased_io_plugin as cli; status = cli.main({cli_args!r}); "
        f"print('HEAVY', json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {packages!r}))); "
        "sys.exit(status)"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("HEAVY "))
    return json.loads(line[len("HEAVY "):])
