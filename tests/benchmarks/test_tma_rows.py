"""benchmarks/tma_rows.py without a GPU: its kernels compile with NVRTC to PTX for sm_90 that holds the bulk
reduces and their group waits (and assemble with ptxas where a CUDA toolkit is installed), and
bench_aot_cells.py's table and CSV carry the TMA rows column, "-" or blank where it does not apply."""

import glob
import re
import shutil
import subprocess

import pytest

from benchmarks import tma_rows


def compiled_ptx() -> bytes:
    try:
        from cuda.bindings import nvrtc  # noqa: F401
    except ImportError:
        pytest.skip("cuda-python's NVRTC bindings are not installed")
    from common.nvrtc import nvrtc_supported_archs

    try:
        archs = nvrtc_supported_archs()
    except Exception as error:  # the bindings without an NVRTC library
        pytest.skip(f"NVRTC cannot be loaded: {error}")
    if tma_rows.ARCH not in archs:
        pytest.skip(f"this NVRTC does not compile for sm_{tma_rows.ARCH}")
    return tma_rows.tma_rows_ptx()


def test_the_kernels_compile_to_ptx_with_bulk_reduces_and_their_waits():
    ptx = compiled_ptx().decode()
    assert re.search(r"^\.version 8\.0$", ptx, re.MULTILINE) and re.search(r"^\.target sm_90\b", ptx, re.MULTILINE)
    for dtype, name in tma_rows.KERNELS.items():
        body = ptx[ptx.index(f".entry {name}("):]
        body = body[: body.index(".entry ", 1)] if ".entry " in body[1:] else body
        reduce = {"float32": "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 ",
                  "float16": "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.noftz.f16 "}[dtype]
        assert reduce in body, name
        for instruction in ("fence.proxy.async.shared::cta;", "cp.async.bulk.commit_group;",
                            f"cp.async.bulk.wait_group.read {tma_rows.STAGES - 1};", "cp.async.bulk.wait_group 0;",
                            "ld.global.nc.L1::no_allocate.v4.u32"):
            assert instruction in body, (name, instruction)


def find_ptxas() -> str | None:
    found = shutil.which("ptxas")
    if found:
        return found
    candidates = sorted(glob.glob("/usr/local/cuda*/bin/ptxas"))
    return candidates[-1] if candidates else None


def test_the_ptx_assembles_for_sm_90_without_spills(tmp_path):
    ptx = compiled_ptx()
    ptxas = find_ptxas()
    if ptxas is None:
        pytest.skip("no ptxas here (a CUDA toolkit's bin/ptxas)")
    path = tmp_path / "tma_rows.ptx"
    path.write_bytes(ptx)
    result = subprocess.run([ptxas, "-arch=sm_90", "-v", str(path), "-o", str(tmp_path / "tma_rows.cubin")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    for name in tma_rows.KERNELS.values():
        assert f"Compiling entry function '{name}' for 'sm_90'" in result.stderr
    assert "0 bytes spill stores, 0 bytes spill loads" in result.stderr
    assert " spill stores" in result.stderr and not re.search(r"[1-9]\d* bytes spill", result.stderr)


def test_applies_only_to_rows_of_a_multiple_of_16_bytes_at_aligned_pointers():
    assert tma_rows.applies(64, "float32", 256, 1024) and tma_rows.applies(8, "float16", 0)
    assert tma_rows.applies(4, "float32") and not tma_rows.applies(4, "float16")
    assert not tma_rows.applies(1, "float32") and not tma_rows.applies(0, "float32")
    assert not tma_rows.applies(64, "float32", 256, 8) and not tma_rows.applies(64, "bfloat16")


def test_the_error_bound_grows_with_the_degree_in_float16_and_is_1e_5_in_float32():
    assert tma_rows.error_bound("float32", 10**3, 10**5) == 1e-5
    assert tma_rows.error_bound("float16", 10**6, 10**5) == 2e-3
    # N = 1e3, E = 524288 (F = 64 at the check's 2^25 values): mean degree 524, u sqrt(d / 6) ~ 4.6e-3
    assert 1.5e-2 < tma_rows.error_bound("float16", 10**3, 2**19) < 2.5e-2
    assert tma_rows.error_bound("float16", 10**3, 10**7) > tma_rows.error_bound("float16", 10**3, 10**6)


def test_the_cells_table_and_csv_carry_tma_rows_with_a_dash_where_it_does_not_apply():
    from benchmarks.bench_aot_cells import CSV_COLUMNS, cells_table

    assert CSV_COLUMNS[:10] == ("device", "dtype", "N", "E", "F", "counts", "aot_ms", "python_ms", "torch_ms",
                                "tma_ms")
    base = dict(dtype="float32", N=10**6, E=10**7, counts=False, aot_plan="direct", aot_ms=1.0, python_plan="direct",
                python_ms=1.0, torch_ms=2.0, check="", aot_graph_ms=0.9, torch_graph_ms=1.8)
    rows = [dict(base, F=64, tma_ms=0.5, tma_check="1.0e-07"), dict(base, F=1, tma_ms=None, tma_check="")]
    lines = cells_table(rows, "GPU")
    header = next(line for line in lines if line.startswith("| dtype"))
    columns = [cell.strip() for cell in header.strip("|").split("|")]
    assert columns.index("TMA rows") == columns.index("torch") + 1 and columns[-1] == "TMA check"
    assert "rounds every edge in float16" in lines[0] and "bincount" in lines[0]
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines if line.startswith("| float32")]
    assert [row[columns.index("TMA rows")] for row in cells] == ["0.5000", "-"]
    assert [row[-1] for row in cells] == ["1.0e-07", "-"]
