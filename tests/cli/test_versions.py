"""The TensorRT (>= 10.4) and polygraphy (>= 0.53.6) floors: version parsing, the one-line refusal, and the
engine path refusing an old TensorRT with exit 3 before any CUDA work; the driver's CUDA version against what
the installed TensorRT and cuda-python need, and the CUDA 12 install line."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from common.errors import MissingDependencyError
from common.versions import (
    AOT_TENSORRT_FLOOR,
    CUDA12_REQUIREMENTS,
    POLYGRAPHY_FLOOR,
    TENSORRT_FLOOR,
    check_aot_tensorrt_version,
    check_driver_version,
    check_polygraphy_version,
    check_tensorrt_version,
    cuda_major_of_distributions,
    driver_version_problem,
    installed_cuda_needs,
    parse_version,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("text, parsed", [
    ("10.4.0", (10, 4, 0)), ("10.13.3.9", (10, 13, 3, 9)), ("11.4.0.106", (11, 4, 0, 106)),
    ("0.53.6.post1", (0, 53, 6)), ("10.16.1.11+cuda13", (10, 16, 1, 11)), ("10", (10,)),
    ("", None), ("?", None), ("v10.4", None), (None, None), (10.4, None),
])
def test_parse_version(text, parsed):
    assert parse_version(text) == parsed


@pytest.mark.parametrize("found", ["10.4", "10.4.0", "10.10.0", "10.13.3.9", "10.16.1.11", "11.4.0.106", "12.0"])
def test_tensorrt_10_4_and_newer_pass(found):
    check_tensorrt_version(found)  # compared as numbers: 10.10 is newer than 10.4


@pytest.mark.parametrize("found", ["10.3.0", "10.3.0.26", "10.0.1", "8.6.1", "?", None])
def test_older_or_unreadable_tensorrt_is_refused_in_one_line(found):
    with pytest.raises(MissingDependencyError) as raised:
        check_tensorrt_version(found)
    message = str(raised.value)
    assert "\n" not in message
    assert str(found) in message and f"tensorrt >= {TENSORRT_FLOOR} is needed" in message
    assert "crash" in message and "plugin object is freed" in message  # why
    assert f"pip install 'tensorrt>={TENSORRT_FLOOR}'" in message


@pytest.mark.parametrize("found, ok", [("0.53.6", True), ("0.54.0", True), ("1.0", True), ("0.53.5", False),
                                       ("0.49.13", False), (None, False)])
def test_polygraphy_floor(found, ok):
    if ok:
        check_polygraphy_version(found)
        return
    with pytest.raises(MissingDependencyError, match=f"polygraphy >= {POLYGRAPHY_FLOOR} is needed") as raised:
        check_polygraphy_version(found)
    assert "TensorRT 11" in str(raised.value) and "\n" not in str(raised.value)


def write_package(folder: Path, name: str, source: str) -> None:
    (folder / name).mkdir()
    (folder / name / "__init__.py").write_text(source)


def run_cli_with(tmp_path: Path, tensorrt_version: str, polygraphy_version: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    """The CLI's engine path in a fresh process whose `tensorrt` and `polygraphy` are empty packages reporting
    these versions (a tensorrt with add_plugin_v3, as TensorRT 10.3 has); returns the result and the CUDA,
    plugin and polygraphy modules the run imported."""
    write_package(tmp_path, "tensorrt", f"__version__ = {tensorrt_version!r}\nclass Builder: pass\n"
                                        "class INetworkDefinition:\n    def add_plugin_v3(self, *args): pass\n")
    write_package(tmp_path, "polygraphy", f"__version__ = {polygraphy_version!r}\n")
    code = ("import json, sys; import aliased_io_plugin as cli; status = cli.main(['--seed', '1']); "
            "print('LOADED', json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('cuda', 'plugin')))); "
            "sys.exit(status)")
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    loaded = next(line for line in result.stdout.splitlines() if line.startswith("LOADED "))
    return result, json.loads(loaded[len("LOADED "):])


@pytest.mark.parametrize("tensorrt_version, polygraphy_version, expected", [
    ("10.3.0", "0.53.6", "tensorrt 10.3.0 found; tensorrt >= 10.4 is needed (10.3's Python bindings crash the process"),
    ("10.4.0", "0.49.13", "polygraphy 0.49.13 found; polygraphy >= 0.53.6 is needed"),
])
def test_cli_refuses_an_old_release_with_exit_3_before_any_cuda_work(tmp_path, tensorrt_version, polygraphy_version,
                                                                     expected):
    result, loaded = run_cli_with(tmp_path, tensorrt_version, polygraphy_version)
    assert result.returncode == 3, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("aliased_io_plugin.py: error: ") and expected in result.stderr
    assert loaded == []  # neither cuda-python nor the plugin (nor its kernel) was touched


@pytest.mark.trt_bindings
def test_each_real_tensorrt_of_the_matrix_passes_the_floor_and_is_recognised(trt):
    """In the real-bindings matrix: the engine path accepts 10.4.0, 10.13.3.9, 10.16.1.11 and 11.4.0.106 by their
    own __version__, and the conftest recognises the stand-in libraries under them (so tests that need a
    Builder, Runtime or registry skip there, saying so). With TensorRT-RTX standing in, there is no `tensorrt`
    installed and nothing to recognise."""
    from tests.conftest import stand_in_libraries_reason

    reason = stand_in_libraries_reason()
    if trt.__name__ != "tensorrt":
        assert reason is None
        return
    check_tensorrt_version(trt.__version__)
    if trt.get_plugin_registry() is None:
        assert reason is not None and f"tensorrt {trt.__version__} is the real Python bindings over stand-in" in reason


def test_the_floors_are_the_same_everywhere_they_are_named():
    """requirements.txt, the install hints and --help name the floors of common.versions, and no older release."""
    from common.imports import INSTALL_HINTS

    requirements = (ROOT / "requirements.txt").read_text().splitlines()
    assert f"tensorrt>={TENSORRT_FLOOR}" in requirements and f"polygraphy>={POLYGRAPHY_FLOOR}" in requirements
    assert f"'tensorrt>={TENSORRT_FLOOR}'" in INSTALL_HINTS["tensorrt"]
    assert f"'polygraphy>={POLYGRAPHY_FLOOR}'" in INSTALL_HINTS["polygraphy"]
    help_text = subprocess.run([sys.executable, str(ROOT / "aliased_io_plugin.py"), "--help"], cwd=ROOT,
                               capture_output=True, text=True, timeout=60).stdout
    assert f"TensorRT >= {TENSORRT_FLOOR}" in help_text and f"polygraphy >= {POLYGRAPHY_FLOOR}" in help_text
    assert ">= 10.3" not in help_text and "0.49" not in help_text


# --- the driver against the CUDA that the installed TensorRT and cuda-python were built for -------------------
CU13_STACK = [("TensorRT 11.4.0.106 (tensorrt-cu13)", 13), ("cuda-python 13.4.4", 13)]


def test_a_cuda_12_driver_under_cuda_13_packages_is_one_line_naming_both_versions_and_the_install():
    message = driver_version_problem(12080, CU13_STACK)
    assert message is not None and "\n" not in message
    assert "CUDA up to 12.8 (cuDriverGetVersion: 12080)" in message
    assert "TensorRT 11.4.0.106 (tensorrt-cu13) and cuda-python 13.4.4 need CUDA 13" in message
    assert f"pip install -r {CUDA12_REQUIREMENTS}" in message and "R580" in message
    with pytest.raises(MissingDependencyError, match="cuDriverGetVersion: 12080"):
        check_driver_version(12080, CU13_STACK)


@pytest.mark.parametrize("driver, needs", [
    (13000, CU13_STACK), (13050, CU13_STACK), (12000, [("cuda-python 12.9.10", 12)]),
    (12080, [("TensorRT 11.4.0.106 (tensorrt-cu12)", 12), ("cuda-python 12.9.10", 12)]), (12020, []),
])
def test_a_driver_as_new_as_every_package_passes(driver, needs):
    assert driver_version_problem(driver, needs) is None
    check_driver_version(driver, needs)


def test_only_what_needs_a_newer_driver_is_named_and_a_driver_older_than_cuda_12_must_be_updated():
    message = driver_version_problem(12040, [("TensorRT 10.16.1.11 (tensorrt-cu12)", 12), ("cuda-python 13.0.0", 13)])
    assert "but cuda-python 13.0.0 needs CUDA 13" in message and "tensorrt-cu12" not in message
    old = driver_version_problem(11080, [("cuda-python 12.9.10", 12)])
    assert "CUDA up to 11.8" in old and "update the NVIDIA driver (R525 or newer)" in old
    assert CUDA12_REQUIREMENTS not in old  # CUDA 12 packages would not start on it either


def test_a_cuda_13_driver_under_packages_of_a_later_cuda_is_told_to_update_the_driver_not_to_install_cu12():
    # requirements-cu12.txt is only the way out for a CUDA 12 driver; a CUDA major with no known branch is named
    message = driver_version_problem(13000, [("cuda-python 14.0.0", 14)])
    assert "CUDA up to 13.0" in message and "cuda-python 14.0.0 needs CUDA 14" in message
    assert CUDA12_REQUIREMENTS not in message and message.endswith("update the NVIDIA driver (one for CUDA 14)")


@pytest.mark.parametrize("names, major", [
    (["tensorrt_cu13_bindings"], 13), (["tensorrt-cu12-libs", "tensorrt_cu12"], 12), (["tensorrt"], None),
    ([], None), (["tensorrt_cu12_bindings", "tensorrt_cu13_libs"], None), (["tensorrt_rtx_cu13_bindings"], 13),
    (["tensorrt-cu13"], 13), (["tensorrt_cu12"], 12), (["tensorrt-cu13", "tensorrt_cu13_libs"], 13),  # name ends in cuNN
])
def test_the_cuda_major_version_from_distribution_names(names, major):
    assert cuda_major_of_distributions(names) == major


def test_installed_cuda_needs_name_the_tensorrt_distribution_and_cuda_python():
    distributions = {"tensorrt_bindings": ["tensorrt_cu13_bindings"], "tensorrt": ["tensorrt_cu13"], "numpy": ["numpy"]}
    assert installed_cuda_needs(distributions, "11.4.0.106", "13.4.4") == CU13_STACK
    assert installed_cuda_needs({"tensorrt": ["tensorrt"]}, "10.4.0", "12.9.10") == [("cuda-python 12.9.10", 12)]
    assert installed_cuda_needs({}, "?", None) == []


def test_requirements_cu12_holds_the_cuda_12_builds_of_every_runtime_dependency():
    """requirements-cu12.txt names each package of requirements.txt, with the CUDA 12 build where one exists,
    at the same floors (the names and versions were checked on PyPI with pip download --no-deps)."""
    def requirements(name):
        return [line.strip() for line in (ROOT / name).read_text().splitlines() if line.strip() and not line.startswith("#")]

    cu12 = requirements(CUDA12_REQUIREMENTS)
    assert cu12 == [f"tensorrt-cu12>={TENSORRT_FLOOR}", "cuda-python>=12.9,<13", "nvidia-cuda-nvrtc-cu12",
                    "nvidia-cuda-runtime-cu12", "nvidia-cuda-cccl-cu12", "numpy>=1.24", f"polygraphy>={POLYGRAPHY_FLOOR}"]
    renamed = {"tensorrt>=10.4": f"tensorrt-cu12>={TENSORRT_FLOOR}", "cuda-python>=12.9": "cuda-python>=12.9,<13",
               "nvidia-cuda-nvrtc": "nvidia-cuda-nvrtc-cu12", "nvidia-cuda-runtime": "nvidia-cuda-runtime-cu12",
               "nvidia-cuda-cccl": "nvidia-cuda-cccl-cu12"}
    assert [renamed.get(line, line) for line in requirements("requirements.txt")] == cu12


def test_the_missing_tensorrt_hint_names_the_package_index_and_the_cuda_12_line():
    from common.imports import INSTALL_HINTS

    assert "pypi.nvidia.com" in INSTALL_HINTS["tensorrt"]
    assert f"pip install -r {CUDA12_REQUIREMENTS}" in INSTALL_HINTS["tensorrt"]
    assert f"pip install -r {CUDA12_REQUIREMENTS}" in INSTALL_HINTS["cuda.bindings"]


# --- --plugin aot: TensorRT >= 10.16 by version, not by the presence of tensorrt.plugin.aot_impl ---------------
@pytest.mark.parametrize("found", ["10.15.1.29", "10.9.0.34", "10.13.3.9"])
def test_plugin_aot_refuses_tensorrt_before_10_16_though_it_has_aot_impl(found):
    with pytest.raises(MissingDependencyError) as raised:
        check_aot_tensorrt_version(found)
    message = str(raised.value)
    assert message.startswith(f"--plugin aot: tensorrt {found} found; tensorrt >= {AOT_TENSORRT_FLOOR} is needed")
    assert f"pip install 'tensorrt>={AOT_TENSORRT_FLOOR}'" in message and "\n" not in message


@pytest.mark.parametrize("found", ["10.16.0.72", "10.16.1.11", "11.0.0.114", "11.4.0.106"])
def test_plugin_aot_accepts_10_16_and_newer(found):
    check_aot_tensorrt_version(found)


def test_cli_plugin_aot_on_tensorrt_10_15_with_aot_impl_is_exit_3_naming_the_version(tmp_path):
    """TensorRT 10.9-10.15 have tensorrt.plugin.aot_impl, so its presence proves nothing: a 10.15 whose
    tensorrt.plugin has aot_impl is refused by its version, in one line, before any CUDA work."""
    write_package(tmp_path, "tensorrt", "__version__ = '10.15.1.29'\nclass Builder: pass\n"
                                        "class INetworkDefinition:\n    def add_plugin_v3(self, *args): pass\n")
    (tmp_path / "tensorrt" / "plugin.py").write_text("def aot_impl(*args): pass\ndef register(*args, **kw): pass\n")
    write_package(tmp_path, "polygraphy", "__version__ = '0.53.6'\n")
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}")
    code = ("import sys; import aliased_io_plugin as cli; status = cli.main(['--seed', '1', '--plugin', 'aot']); "
            "print('CUDA', sorted(m for m in sys.modules if m.split('.')[0] == 'cuda')); sys.exit(status)")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 3, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "--plugin aot: tensorrt 10.15.1.29 found; tensorrt >= 10.16 is needed" in result.stderr
    assert "CUDA []" in result.stdout


def test_the_engine_path_compares_the_driver_with_the_installed_cuda_before_the_runtime_is_called(monkeypatch):
    """network.engine.require_cuda_device asks cuDriverGetVersion first: a CUDA 12.8 driver under tensorrt-cu13
    and cuda-python 13 is one line naming both (exit 3), before cudaGetDeviceCount (which such a driver fails
    unexplained); a CUDA 13 driver goes on to the device check. cuda-python's real module, its calls recorded."""
    import importlib.metadata

    import cuda.bindings
    from cuda.bindings import driver, runtime

    import network.engine

    reported = {"driver": 12080}
    device_checks = []
    monkeypatch.setattr(driver, "cuDriverGetVersion", lambda: (driver.CUresult.CUDA_SUCCESS, reported["driver"]))
    monkeypatch.setattr(importlib.metadata, "packages_distributions",
                        lambda: {"tensorrt_bindings": ["tensorrt_cu13_bindings"], "tensorrt": ["tensorrt_cu13"]})
    monkeypatch.setattr(runtime, "cudaGetDeviceCount",
                        lambda: device_checks.append(True) or (runtime.cudaError_t.cudaSuccess, 1))
    with pytest.raises(MissingDependencyError) as raised:
        network.engine.require_cuda_device("11.4.0.106")
    assert str(raised.value).startswith(
        "the NVIDIA driver runs CUDA up to 12.8 (cuDriverGetVersion: 12080), but TensorRT 11.4.0.106 (tensorrt-cu13) "
        f"and cuda-python {cuda.bindings.__version__} need CUDA 13: with this driver use CUDA 12 packages: "
        f"pip install -r {CUDA12_REQUIREMENTS}")
    assert device_checks == []
    reported["driver"] = 13000
    network.engine.require_cuda_device("11.4.0.106")
    assert device_checks == [True]
