"""``sweep --quiet`` hides progress and notes, never a warning about processes it stopped."""

from __future__ import annotations

import pytest

from medrewardbench.cli.sweep import _RichSweepProgress


@pytest.mark.parametrize("enabled", [True, False])
def test_a_warning_is_shown_with_and_without_quiet_and_a_note_only_without(
    enabled: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    sink = _RichSweepProgress(enabled=enabled)
    sink.note("batch 7 in_progress")
    sink.warning("stopped the server of 'tiny' that an earlier sweep left running")
    sink.close()
    captured = capsys.readouterr()
    assert "stopped the server of 'tiny' that an earlier sweep left running" in captured.err
    assert ("batch 7 in_progress" in captured.err) is enabled
    assert captured.out == ""
