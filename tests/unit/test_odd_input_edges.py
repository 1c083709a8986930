"""Odd input at the CLI's edges is one line with a documented exit status: an output folder that cannot be
written, a timeout of nan, a Mac whose tool never answers a capture."""

from __future__ import annotations

import errno
import os
import sys
import textwrap

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_commands
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage import runlock
from mlx_fleet import capture as cap
from mlx_fleet.cli import build_parser, main
from mlx_fleet.errors import EXIT_BAD_INPUT


def test_an_output_folder_that_cannot_be_made_is_one_line(tmp_path, capsys):
    (tmp_path / "inventory.yml").write_text("all:\n  children:\n    mlx_cluster:\n      hosts:\n        m1:\n")
    (tmp_path / "a-file").write_text("")
    target = tmp_path / "a-file" / "out"
    assert main(["hostfile", "-i", str(tmp_path / "inventory.yml"), "--output-dir", str(target)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert err.startswith("mlx-fleet hostfile: ") and f"{target}: {os.strerror(errno.ENOTDIR)}" in err


@pytest.mark.parametrize("argv", [["onboard", "new-mac", "-i", "inv", "--cable-timeout"],
                                  ["verify", "-i", "inv", "--timeout"]])
@pytest.mark.parametrize("value", ["nan", "inf", "-5", "0", "soon"])
def test_a_timeout_that_would_never_end_is_refused(argv, value, capsys):
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(argv + [value])
    assert done.value.code == EXIT_BAD_INPUT
    assert f"{argv[-1]}: {value!r}" in capsys.readouterr().err


def test_parsed_timeouts_keep_their_value():
    args = build_parser().parse_args(["onboard", "new-mac", "-i", "inv", "--address", "10.0.0.9", "--cable-timeout", "90"])
    assert args.cable_timeout == 90.0


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_the_lock_wait_is_bounded_whatever_the_environment_says(monkeypatch, value):
    monkeypatch.setenv(runlock.WAIT_ENV, value)
    assert runlock.wait_seconds() == runlock.DEFAULT_WAIT


HANGING_SSH = textwrap.dedent("""\
    #!{python}
    import sys, time
    args = sys.argv[1:]
    if "-f" in args or "-O" in args:
        sys.exit(0)
    if "sw_vers" in args[-1]:
        time.sleep(60)
    sys.stdout.write("out\\n")
    """)


def test_a_read_that_never_answers_is_a_capture_error(tmp_path, monkeypatch):
    ssh = tmp_path / "ssh"
    ssh.write_text(HANGING_SSH.format(python=sys.executable))
    ssh.chmod(0o755)
    monkeypatch.setattr(cap, "READ_TIMEOUT", 1)
    with pytest.raises(cap.CaptureError, match=r"'sw_vers' gave no answer within 1 s"):
        cap.capture("mac-1", tmp_path / "cap", ssh=str(ssh))


def test_a_macos_tool_that_hangs_fails_its_read_not_the_module(monkeypatch):
    monkeypatch.setattr(macos_commands, "READ_TIMEOUT", 1)
    rc, out, err = macos_commands.capture(object(), ["sleep", "60"])
    assert (rc, out) == (macos_commands.TIMED_OUT, "")
    assert err.split(": ")[0] == "sleep 60" and "1 s" in err and "\n" not in err  # the command, the bound


# --- mlx-fleet lock --index: an index that cannot give the wheels' listing ------------------------------

FAKE_UV = textwrap.dedent("""\
    #!/bin/sh
    # uv as `mlx-fleet lock` runs it: the version, and a compile that pins one hashed package.
    case "$1" in
      --version) echo "uv 0.13.9" ;;
      pip) echo "mlx==0.32.4 --hash=sha256:{sha}" ;;
    esac
    """).format(sha="1" * 64)


def _lock(tmp_path, index: str, capsys) -> tuple[int, str]:
    (tmp_path / "inventory.yml").write_text("all:\n  children:\n    mlx_cluster:\n      hosts:\n        m1:\n")
    uv = tmp_path / "uv"
    uv.write_text(FAKE_UV)
    uv.chmod(0o755)
    status = main(["lock", "-i", str(tmp_path / "inventory.yml"), "--index", index, "--uv-bin", str(uv),
                   "-o", str(tmp_path / "lock.json")])
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert not (tmp_path / "lock.json").exists()
    return status, err


def test_lock_from_a_file_tree_that_is_no_json_index_is_one_line(tmp_path, capsys):
    # A mirror laid out for pip (one index.html per project): no JSON page for the project's URL.
    (tmp_path / "simple" / "mlx").mkdir(parents=True)
    (tmp_path / "simple" / "mlx" / "index.html").write_text('<a href="mlx-0.32.4.whl">mlx-0.32.4.whl</a>\n')
    status, err = _lock(tmp_path, f"file://{tmp_path}/simple", capsys)
    assert status == EXIT_BAD_INPUT
    page = f"file://{tmp_path}/simple/mlx/"  # the project's page, which is not there
    assert err.startswith("mlx-fleet lock: ") and f" {page}: " in err


def test_lock_from_an_html_only_index_is_one_line(tmp_path, capsys, monkeypatch):
    import http.server
    import threading

    from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.env import package_index

    class Html(http.server.BaseHTTPRequestHandler):  # answers HTML (PEP 503) whatever the Accept header asks
        def log_message(self, *args):
            pass

        def do_GET(self):  # noqa: N802 (http.server's name)
            body = b'<!DOCTYPE html><html><body><a href="/f/mlx-0.32.4.whl">mlx-0.32.4.whl</a></body></html>\n'
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Html)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    real = package_index.open_http
    # The lock accepts only https://; this server speaks plain http on this machine.
    monkeypatch.setattr(package_index, "open_http", lambda url, *a, **k: real(url.replace("https:", "http:", 1), *a, **k))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    try:
        index = f"https://127.0.0.1:{server.server_port}/simple"
        status, err = _lock(tmp_path, index, capsys)
    finally:
        server.shutdown()
        server.server_close()
    assert status == EXIT_BAD_INPUT
    assert err.startswith("mlx-fleet lock: ") and f" {index}/mlx/: " in err and "JSON" in err.split()
