"""`mlx-fleet watch --install` / `--uninstall`: the LaunchAgent and the systemd unit as rendered, and an
install/uninstall into a folder of the test's own with a recording stand-in for systemctl (never the
controller's real service manager)."""

import plistlib
import shlex
import stat

import pytest

from mlx_fleet import watch_service
from mlx_fleet.cli import build_parser

ODD = "curl -s -d @- 'https://chat.example/hook?a=1&b=$HOME' # 50% \"quoted\""


def args(*extra):
    return build_parser().parse_args(["watch", "-i", "inv dir/hosts.yml", "--every", "30", *extra])


@pytest.fixture
def fake_tools(tmp_path, monkeypatch):
    """An mlx-fleet on PATH and a systemctl that records its calls."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    calls = tmp_path / "calls"
    for name, body in (("mlx-fleet", "exit 0"),
                       ("systemctl", f'printf "%s\\n" "$*" >> {shlex.quote(str(calls))}')):
        tool = bin_ / name
        tool.write_text(f"#!/bin/sh\n{body}\n")
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_}:/usr/bin:/bin")
    return bin_, calls


def test_the_command_line_is_absolute_and_carries_the_options(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = watch_service.watch_argv("/opt/mlx/bin/mlx-fleet", args("--on-change", ODD, "--out", "w"))
    assert argv[:4] == ["/opt/mlx/bin/mlx-fleet", "watch", "-i", str(tmp_path / "inv dir/hosts.yml")]
    assert argv[argv.index("--every") + 1] == "30"
    assert argv[argv.index("--out") + 1] == str(tmp_path / "w")
    assert argv[argv.index("--on-change") + 1] == ODD
    assert "--once" not in argv


def test_the_launch_agent_round_trips_through_plistlib():
    argv = ["/Users/me/.local/bin/mlx-fleet", "watch", "-i", "/Users/me/lab inv", "--on-change", ODD]
    data = plistlib.loads(watch_service.render_plist(argv, watch_service.Path("/Users/me/Library/Logs/w.log"),
                                                     "/usr/bin:/bin"))
    assert data["Label"] == watch_service.LABEL
    assert data["ProgramArguments"] == argv  # a list: no shell, nothing to quote
    assert data["RunAtLoad"] is True and data["KeepAlive"] == {"SuccessfulExit": False}
    assert data["StandardOutPath"] == data["StandardErrorPath"] == "/Users/me/Library/Logs/w.log"
    assert data["EnvironmentVariables"]["PATH"] == "/usr/bin:/bin"


def unquote_exec(line: str) -> list[str]:
    """Read an ExecStart line as systemd does for the quoting render_unit uses (double quotes, C escapes,
    %% and $$)."""
    words, i = [], 0
    while i < len(line):
        if line[i] == " ":
            i += 1
            continue
        assert line[i] == '"', line[i:]
        i, word = i + 1, ""
        while line[i] != '"':
            if line[i] == "\\":
                word += {"n": "\n"}.get(line[i + 1], line[i + 1])
                i += 2
            elif line[i] in "%$":
                assert line[i + 1] == line[i], f"lone {line[i]} in {line!r}"
                word += line[i]
                i += 2
            else:
                word += line[i]
                i += 1
        words.append(word)
        i += 1
    return words


@pytest.mark.parametrize("user", [True, False])
def test_the_systemd_unit_has_its_keys_and_quotes_every_word(user):
    argv = ["/home/me/.local/bin/mlx-fleet", "watch", "-i", "/home/me/lab inv", "--on-change", ODD]
    unit = watch_service.parse_unit(watch_service.render_unit(argv, user))
    service = unit["Service"]
    assert unquote_exec(service["ExecStart"]) == argv
    assert service["Type"] == "simple" and service["Restart"] == "on-failure"
    assert service["SuccessExitStatus"] == "130" and service["RestartPreventExitStatus"] == "2"
    assert unit["Install"]["WantedBy"] == ("default.target" if user else "multi-user.target")
    assert "After" in unit["Unit"] and unit["Unit"]["Description"]


def test_install_and_uninstall_into_a_folder_idempotently(tmp_path, fake_tools, capsys):
    bin_, calls = fake_tools
    host = watch_service.Host("Linux", tmp_path / "units", [str(bin_ / "systemctl"), "--user"], 1000)
    options = args("--on-change", ODD)

    assert watch_service.install(options, host) == 0
    unit = tmp_path / "units" / watch_service.UNIT
    assert stat.S_IMODE(unit.stat().st_mode) == 0o600  # the --on-change command may carry a token
    argv = unquote_exec(watch_service.parse_unit(unit.read_text())["Service"]["ExecStart"])
    assert argv[0] == str(bin_ / "mlx-fleet") and argv[1] == "watch" and ODD in argv
    first = capsys.readouterr().out
    told = [shlex.split(line.split("look at it: ")[-1], comments=True)  # the commands to look at the service
            for line in first.replace(str(bin_ / "systemctl"), "systemctl").splitlines()]
    assert f"wrote {unit}" in first and ["systemctl", "--user", "status", watch_service.UNIT] in told
    assert "journalctl --user -u" in first
    assert calls.read_text().splitlines() == ["--user daemon-reload", f"--user enable {watch_service.UNIT}",
                                              f"--user restart {watch_service.UNIT}"]
    text = unit.read_text()

    assert watch_service.install(options, host) == 0  # again: the same file, kept
    assert "kept (unchanged)" in capsys.readouterr().out and unit.read_text() == text
    assert list(unit.parent.iterdir()) == [unit]  # no temporary file left beside it

    calls.write_text("")
    assert watch_service.uninstall(host) == 0
    assert not unit.exists() and f"removed {unit}" in capsys.readouterr().out
    assert [line.split() for line in calls.read_text().splitlines()] == [
        ["--user", "disable", "--now", watch_service.UNIT], ["--user", "daemon-reload"]]

    calls.write_text("")
    assert watch_service.uninstall(host) == 0  # again: nothing there, nothing to tell systemd
    assert "nothing installed" in capsys.readouterr().out and calls.read_text() == ""


def test_a_failing_service_manager_is_one_line(tmp_path, fake_tools):
    bin_, _ = fake_tools
    broken = bin_ / "broken"
    broken.write_text("#!/bin/sh\necho 'Failed to connect to bus: No medium found' >&2\nexit 1\n")
    broken.chmod(0o755)
    host = watch_service.Host("Linux", tmp_path / "units", [str(broken), "--user"], 1000)
    with pytest.raises(watch_service.UserError, match="Failed to connect to bus"):
        watch_service.install(args(), host)


def test_without_mlx_fleet_on_path_install_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    host = watch_service.Host("Linux", tmp_path / "units", ["systemctl", "--user"], 1000)
    with pytest.raises(watch_service.UserError, match="not on PATH"):
        watch_service.install(args(), host)
    assert not (tmp_path / "units" / watch_service.UNIT).exists()


def test_a_service_file_an_earlier_install_left_0644_is_made_0600(tmp_path, fake_tools, capsys):
    bin_, _calls = fake_tools
    host = watch_service.Host("Linux", tmp_path / "units", [str(bin_ / "systemctl"), "--user"], 1000)
    options = args("--on-change", "curl -s -d @- https://chat.example/hook/TOKEN")
    watch_service.install(options, host)
    unit = tmp_path / "units" / watch_service.UNIT
    unit.chmod(0o644)  # as installs before 0600 wrote it, same text
    text = unit.read_text()
    assert watch_service.install(options, host) == 0
    assert stat.S_IMODE(unit.stat().st_mode) == 0o600 and unit.read_text() == text
