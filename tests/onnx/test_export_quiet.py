"""export.export_onnx.quiet_exporter: torch.onnx's log and warnings held back while the exporter runs, and the
caller's logging and warning settings as they were afterwards (also when the export raises). No torch needed."""

import contextlib
import logging
import warnings

import pytest

from export.export_onnx import quiet_exporter


@pytest.mark.parametrize("level", [logging.NOTSET, logging.DEBUG, logging.WARNING, logging.CRITICAL])
@pytest.mark.parametrize("raises", [False, True])
def test_torch_onnx_log_level_is_error_inside_and_the_callers_afterwards(level, raises):
    log = logging.getLogger("torch.onnx")
    before = log.level
    log.setLevel(level)
    try:
        with pytest.raises(RuntimeError) if raises else contextlib.nullcontext():
            with quiet_exporter():
                assert log.level == logging.ERROR
                assert not log.isEnabledFor(logging.WARNING) and log.isEnabledFor(logging.ERROR)
                if raises:
                    raise RuntimeError("export failed")
        assert log.level == level
    finally:
        log.setLevel(before)


def test_warnings_are_held_back_inside_and_the_filters_restored_afterwards():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        filters = list(warnings.filters)
        with quiet_exporter():
            warnings.warn("from the exporter", DeprecationWarning)
        assert caught == [] and warnings.filters == filters
        warnings.warn("after it", UserWarning)
        assert [str(warning.message) for warning in caught] == ["after it"]

