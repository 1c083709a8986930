"""explain's odd input (hypothesis, in the style of test_odd_input.py): any bytes on stdin, real logs with bytes
and terminal escape sequences mixed in. The only way out is an exit status (0 a cause, 1 unknown); every line
printed is free of control characters (a log's ESC ] 52 would set the clipboard, ESC [2J clear the screen)."""

from __future__ import annotations

import collections
import io
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import examples
from mlx_fleet.cli import build_parser
from mlx_fleet.errors import EXIT_ATTENTION, EXIT_OK
from mlx_fleet.explain_cli import run_explain

COUNT: collections.Counter = collections.Counter()
SETTINGS = dict(deadline=None, database=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
LOG_LINES = [line.encode() for path in sorted((Path(__file__).resolve().parents[1] / "fixtures" / "logs").glob("*__*.log"))
             for line in path.read_text().split("\n")[1:] if line.strip()]
ESCAPES = [b"\x1b]52;c;ZWNobyBwd25lZA==\x07", b"\x1b[2J", b"\x1b[H", b"\x1b[31m", b"\x1b]0;title\x1b\\", b"\r",
           b"\x08", b"\x9b2J", "\u2028".encode(), "\u202e".encode(), b"\x00", b"\xff\xfe", b"\xc3", b"\xed\xa0\x80"]
PIECES = st.sampled_from(LOG_LINES) | st.sampled_from(ESCAPES) | st.binary(max_size=30)
ARGS = build_parser("explain").parse_args(["explain", "-"])  # parsed once: each input runs the command itself


def explain_stdin(monkeypatch, capsys, data: bytes):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    status = run_explain(ARGS)
    out = capsys.readouterr().out
    assert status in (EXIT_OK, EXIT_ATTENTION)
    for line in out.splitlines():
        assert line.isprintable(), line
    return status, out


@settings(max_examples=examples(2500), **SETTINGS)
@given(data=st.binary(max_size=400))
def test_any_bytes_on_stdin(monkeypatch, capsys, data):
    COUNT["stdin bytes"] += 1
    explain_stdin(monkeypatch, capsys, data)


@settings(max_examples=examples(2500), **SETTINGS)
@given(pieces=st.lists(PIECES, min_size=1, max_size=8), separator=st.sampled_from([b"", b"\n", b"\r\n", b" "]))
def test_real_logs_with_escapes_and_bytes_mixed_in(monkeypatch, capsys, pieces, separator):
    COUNT["logs with escapes"] += 1
    explain_stdin(monkeypatch, capsys, separator.join(pieces))


def test_a_log_s_escape_sequences_are_printed_as_text(monkeypatch, capsys):
    log = b"\x1b]52;c;ZWNobyBwd25lZA==\x07RuntimeError: [ring] Couldn't bind socket (error: 49)\x1b[2J\xff\n"
    status, out = explain_stdin(monkeypatch, capsys, log)
    assert status == EXIT_OK and "\x1b" not in out and "\x07" not in out
    assert out.splitlines()[0] == "cause: no-ipv4 or hostfile"


def test_inputs_counted(request, capsys):
    """The total, printed for the record; it counts only when the whole file ran."""
    if request.config.option.keyword or request.config.option.markexpr or len(COUNT) < 2:
        pytest.skip("counts only when the whole file runs")
    total = sum(COUNT.values())
    with capsys.disabled():
        print(f"\nexplain odd input: {total} inputs ({', '.join(f'{k} {v}' for k, v in sorted(COUNT.items()))})")
    assert total >= examples(5_000)
