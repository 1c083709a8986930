"""The summary callback (plain ansible-playbook, AWX) and the CLI compose the same lines from the same task
results: plugin_utils.render.summary is their one home."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.glue.actions import CLUSTER_STEP, INPUT_ERRORS, OTHER_ERRORS
from mlx_fleet import runner
from mlx_fleet.runner import events as runner_events
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render import summary

callback = importlib.import_module("ansible_collections.mlx_fleet.cluster.plugins.callback.summary")

FABRIC = {"backend": "ring", "reason": "auto chose ring: mini-2 has RDMA off", CLUSTER_STEP: True, "changed": True}
RDMA = {"summary": "mini-2 needs the Recovery step", "needs_recovery": ["mini-2"], CLUSTER_STEP: True,
        "checklist": {"html": "/out/recovery-checklist.html", "text": "/out/recovery-checklist.txt"}}
# (kind, host, action, the task's name, its result, failed)
RESULTS = [
    ("ok", "mini-1", "mlx_fleet.cluster.macos_node", "Keep the Mac awake", {"changed": True, "warnings": ["odd"]}),
    ("ok", "mini-2", "mlx_fleet.cluster.macos_node", "Keep the Mac awake", {"changed": False}),
    ("failed", "mini-3", "mlx_fleet.cluster.macos_facts", "Read the Mac", {"msg": "Timed out\nafter 120 s"}),
    ("failed", "localhost", "mlx_fleet.cluster.inventory_check", "Validate hosts",
     {"msg": "bad model x\nsecond", INPUT_ERRORS: ["bad model x"], OTHER_ERRORS: ["second"]}),
    ("unreachable", "mini-4", "mlx_fleet.cluster.macos_facts", "Read the Mac", {"msg": "ssh: no route\nmore"}),
    ("ok", "mini-1", "mlx_fleet.cluster.rdma_readiness", "Judge every Mac", RDMA),
    ("ok", "mini-1", "mlx_fleet.cluster.fabric", "Build the fabric", FABRIC),
]


def _task_result(host, action, name, res, role="mlx_fleet.cluster.mlx_fabric"):
    task = SimpleNamespace(action=action, name=name, get_name=lambda: f"{role} : {name}")
    return SimpleNamespace(_task=task, _host=SimpleNamespace(get_name=lambda: host), _result=dict(res))


def _callback_lines(results, check=False) -> list[str]:
    plugin = callback.CallbackModule()
    plugin.outcome = callback.RunOutcome(check=check)
    for kind, host, action, name, res in results:
        getattr(plugin, f"v2_runner_on_{kind}")(_task_result(host, action, name, res))
    shown = []
    plugin._display = SimpleNamespace(banner=lambda text: shown.append(f"== {text}"), display=shown.append)
    plugin.v2_playbook_on_stats(None)
    return shown


def _cli_lines(results, check=False) -> list[str]:
    report = runner.RunReport(playbook="mlx_fleet.cluster.site", check=check)
    events = runner_events.EventHandler(report, None)
    for kind, host, action, name, res in results:
        events({"event": f"runner_on_{kind}", "event_data": {"host": host, "task_action": action, "task": name,
                                                             "res": dict(res)}})
    return report.lines(summary._rdma_lines(report) + summary._fabric_lines(report))


def test_the_callback_prints_the_cli_summary_lines():
    shown = _callback_lines(RESULTS)
    assert shown[0] == "== MLX FLEET SUMMARY"
    assert shown[1:] == _cli_lines(RESULTS)
    assert shown[1:] == [
        "error: bad model x",
        "unreachable: mini-4: ssh: no route",
        "failed: localhost: Validate hosts: second",
        "failed: mini-3: Read the Mac: Timed out",
        "  after 120 s",
        "RDMA: mini-2 needs the Recovery step",
        "to do at the rack: Recovery step for mini-2; checklist /out/recovery-checklist.html "
        "(text: /out/recovery-checklist.txt)",
        "backend: ring (auto chose ring: mini-2 has RDMA off)",
        "warning: mini-1: odd",
        "changed: mini-1",
    ]


def test_an_ignored_failure_is_no_failure_and_check_mode_says_would():
    plugin = callback.CallbackModule()
    plugin.outcome = callback.RunOutcome(check=True)
    plugin.v2_runner_on_failed(_task_result("mini-1", "x", "Try", {"msg": "no"}), ignore_errors=True)
    plugin.v2_runner_on_ok(_task_result("mini-2", "x", "Set", {"changed": True}))
    assert plugin.outcome.lines() == ["would change: mini-2"]
