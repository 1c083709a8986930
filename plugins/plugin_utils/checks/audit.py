"""The audit: every Mac against the declared state and against the other Macs (docs/audit.md).

Input: per Mac what node_state read (``mlx_fleet_macos``, ``mlx_fleet_thunderbolt``, ``mlx_fleet_node``)
and what the inventory declares for it (``mlx_fleet_declared``, plugin_utils.declare.host), plus what the
controller keeps (the hostfiles, the cluster model, the RDMA ledger, the lock). Output: one Check per
fact compared, with the Macs it concerns, what was expected, what was found, and the fix. Pure Python:
the audit action plugin reads the files and writes the report; the CLI prints it.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import asdict, dataclass, field

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.mlx_env import managed_python
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_settings import normalize_power, plan_power
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.judge import fabric as fab
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.backend import RDMA_BACKENDS
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.files import HOSTFILE, RING_HOSTFILE
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.judge import field_checks
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import fixes
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.judge import facts as judges
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.rdma import readiness as rdma
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.findings import MIXED_BUILDS, Finding
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ports import Cable, Port, hardware_port
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.env.artifacts import PlanError, locked_packages, python_build
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.versions import version_tuple
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.environment import EnvLockError, check_declaration
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.mac_models import MODELS, mismatch
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.findings import join
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models import status as models_status

FORMAT = "mlx-fleet-audit/1"
HOSTFILES = (HOSTFILE, RING_HOSTFILE)
CLUSTER = "cluster"  # the "Mac" of checks about the whole cluster (cables, the lock)

# What converges each kind of fact; {site}, {node}, ... are the commands that run those playbooks on the
# inventory as the user gave it, in the form of the install in use, and {inventory} that inventory (fixes.fill).
FIX_NODE, FIX_ENV, FIX_FABRIC, FIX_HOSTFILE = judges.FIX_NODE, judges.FIX_ENV, judges.FIX_FABRIC, judges.FIX_HOSTFILE
FIX_RECOVERY, FIX_LOCK, FIX_CONVERGE = judges.FIX_RECOVERY, judges.FIX_LOCK, judges.FIX_CONVERGE
FIX_MODELS_LOCK = "{lock}"


@dataclass
class Check:
    """One fact compared, a row of the audit's table: ok, or drift with the fix (its finding)."""

    topic: str  # the row it belongs to in the Macs x facts table ("macOS", "packages", "pmset", ...)
    fact: str  # what was compared ("macOS", "package mlx", "pmset sleep", "cable mini-1:1 -- mini-2:1")
    macs: list[str]  # the Macs it concerns (CLUSTER for the lock)
    expected: str
    found: str
    ok: bool
    fix: str = ""
    kind: str = "drift"  # the kind of its finding (base.findings.KINDS): a model's own, else drift

    @property
    def drift(self) -> Finding | None:
        """The finding when the fact differs; None when it matches."""
        if self.ok:
            return None
        return Finding(self.kind, tuple(m for m in self.macs if m != CLUSTER), self.found, self.expected, self.fix,
                       fact=self.fact)


@dataclass
class Audit:
    macs: list[str]  # audited, in inventory order
    not_audited: list[str]  # in the group but not read (unreachable, or the read failed)
    checks: list[Check] = field(default_factory=list)

    @property
    def drifted(self) -> list[Check]:
        """The rows that differ."""
        return [c for c in self.checks if not c.ok]

    @property
    def findings(self) -> list[Finding]:
        return [c.drift for c in self.drifted]

    def to_dict(self, generated: str, inventory: str) -> dict:
        return {
            "format": FORMAT,
            "generated": generated,
            "inventory": inventory,
            "macs": self.macs,
            "not_audited": self.not_audited,
            "facts_compared": len(self.checks),
            "drift": len(self.findings),
            "findings": [asdict(c) for c in self.drifted],
            "checks": [asdict(c) for c in self.checks],
        }


def _others(names: list[str]) -> str:
    return join(names) if len(names) <= 3 else f"the {len(names)} other Macs"


def _majority(values: dict[str, object], key=None):
    """The most common value (ties: the greatest by KEY, else the first seen)."""
    counts = Counter(values.values())
    order = list(dict.fromkeys(values.values()))
    return max(order, key=lambda v: (counts[v], key(v) if key else -order.index(v)))


def _build_key(release: tuple[str, str]) -> tuple:
    """(version, build) in release order: 26.2 (25C56) < 26.2 (25C57) < 26.3 (25D21)."""
    version, build = release
    digits = "".join(c if c.isdigit() else " " for c in build).split()
    letters = "".join(c for c in build if c.isalpha())
    return version_tuple(version), [int(d) for d in digits[:1]], letters, [int(d) for d in digits[1:]], build


def _release(macos: dict) -> tuple[str, str]:
    return str(macos["product_version"]), str(macos["build_version"])


def _release_text(release: tuple[str, str]) -> str:
    return f"{release[0]} ({release[1]})"


# --- macOS and the hardware -----------------------------------------------------------------------


def _macos(macs, observed, declared, checks):
    releases = {h: _release(observed[h]["mlx_fleet_macos"]) for h in macs}
    common = _majority(releases, _build_key)
    newest = max(releases.values(), key=_build_key)
    why = f"one build on every Mac: {MIXED_BUILDS}"
    for host in macs:
        found, minimum = releases[host], declared[host]["min_macos"]
        same = [h for h in macs if h != host and releases[h] == common]
        if version_tuple(found[0]) < version_tuple(minimum):
            to = _release_text(newest) if version_tuple(newest[0]) >= version_tuple(minimum) else f"{minimum} or later"
            checks.append(Check("macOS", "macOS", [host], f"{minimum} or later (mlx_fleet_min_macos)",
                                _release_text(found), False, f"update macOS on {host} to {to}"))
        elif found != common:
            if _build_key(found) > _build_key(common):
                behind = [h for h in macs if releases[h] != found]
                fix = f"update macOS on {join(behind)} to {_release_text(found)} ({why})"
            else:
                fix = f"update macOS on {host} to {_release_text(common)} ({why})"
            checks.append(Check("macOS", "macOS", [host], f"{_release_text(common)}, as on {_others(same)}",
                                _release_text(found), False, fix))
        else:
            checks.append(Check("macOS", "macOS", [host], _release_text(common), _release_text(found), True))


def _hardware(macs, observed, declared, ledger, checks):
    by_model: dict[str, dict[str, int]] = {}
    for host in macs:
        macos = observed[host]["mlx_fleet_macos"]
        by_model.setdefault(macos["model_identifier"], {})[host] = macos["memory_bytes"]
    for host in macs:
        macos = observed[host]["mlx_fleet_macos"]
        found_model = f"{macos['model_name']} ({macos['model_identifier']})"
        model = MODELS.get(declared[host].get("model") or "")
        if model:
            checks.append(Check("model", "model", [host], f"{model.model_name} ({model.model_id}), mlx_fleet_model "
                                f"{model.key}", found_model, mismatch(host, model.key, macos) is None,
                                f"check that the Mac answering as {host} is the one the inventory means, or "
                                f"correct its mlx_fleet_model"))
        peers = by_model[macos["model_identifier"]]
        if len(peers) > 1:
            memory = _majority(peers)
            same = [h for h in peers if h != host and peers[h] == memory]
            checks.append(Check("memory", "memory", [host], f"{memory >> 30} GB, as on {_others(same)}",
                                f"{macos['memory_bytes'] >> 30} GB", macos["memory_bytes"] == memory,
                                f"check that the Mac answering as {host} is the one you meant (a swapped Mac?)"))
        seen = ledger.get("nodes", {}).get(host)
        if seen and seen.get("serial_number"):
            checks.append(Check("serial", "serial number", [host],
                                f"{seen['serial_number']} (seen ready {seen['last_seen_ready']})",
                                macos["serial_number"], macos["serial_number"] == seen["serial_number"],
                                f"another Mac answers as {host} (swapped?): check the serial number on its label, "
                                f"then {FIX_CONVERGE}"))


# --- the environment ------------------------------------------------------------------------------


def _environment(macs, observed, declared, lock, checks):
    paths = {h: declared[h]["env_path"] for h in macs}
    common_path = _majority(paths)
    envs = {h: observed[h]["mlx_fleet_node"]["environment"] for h in macs}
    present = [h for h in macs if envs[h]["exists"]]
    # With an interpreter of the Macs' own, the one most Macs built from is the one expected.
    common_home = _majority({h: envs[h]["python"]["home"] for h in present}) if present else None
    common_version = _majority({h: envs[h]["python"]["version"] for h in present}) if present else None
    for host in macs:
        env, path = envs[host], paths[host]
        expected = f"the locked environment at {common_path}"
        if path != common_path:
            expected += f" (mlx_env_path is {path} here: the same path on every Mac)"
        if not env["exists"]:
            found = f"none at {path}" + (f" ({env['error']})" if env.get("error") else "")
        else:
            found = f"at {env['python']['prefix']}"
        ok = env["exists"] and env["python"]["prefix"] == path == common_path
        checks.append(Check("environment", "environment", [host], expected, found, ok, FIX_ENV))
        if not env["exists"]:
            continue
        python = env["python"]
        want_home, want_version = common_home, common_version
        build = None
        if lock and not declared[host]["python_interpreter"]:
            try:
                build = python_build(lock, python)
            except PlanError:
                build = None
        if build:
            want_home = os.path.dirname(managed_python(declared[host]["env_store"], build["key"]))
            want_version = build["version"]
        checks.append(Check("Python", "Python", [host], f"{want_version} from {want_home}",
                            f"{python['version']} from {python['home']}",
                            (python["version"], python["home"]) == (want_version, want_home), FIX_ENV))
        if lock:
            _packages(host, env, lock, checks)


def _packages(host, env, lock, checks):
    locked = {pkg["name"]: pkg["version"] for pkg in locked_packages(lock, env["python"]["markers"])}
    installed, records = env["installed"], env.get("records") or {}
    for name, version in sorted(locked.items()):
        have = installed.get(name)
        record = records.get(name) or {}
        changed = [f"{path} modified" for path in record.get("modified", [])]
        changed += [f"{path} missing" for path in record.get("missing", [])]
        more = record.get("modified_count", 0) + record.get("missing_count", 0) - len(changed)
        if more > 0:
            changed.append(f"{more} more")
        if have is None:
            found = "not installed"
        elif changed:
            found = f"{have} with {', '.join(changed)} (not as its RECORD lists them)"
        else:
            found = have
        expected = f"{version} (the lock)" if have != version else f"{version} with its files as installed"
        checks.append(Check("packages", f"package {name}", [host], expected, found,
                            have == version and not changed, FIX_ENV))
    extra = sorted(set(installed) - set(locked))
    checks.append(Check("packages", "extra packages", [host], "none beyond the lock",
                        ", ".join(f"{n} {installed[n]}" for n in extra) or "none", not extra, FIX_ENV))


# --- node settings --------------------------------------------------------------------------------


def _node_settings(macs, observed, declared, checks):
    for host in macs:
        node, want = observed[host]["mlx_fleet_node"], declared[host]
        settings = normalize_power(want["power_settings"])
        try:
            changes, unsupported, before, dummy = plan_power(node["pmset"], settings)
        except ValueError as exc:
            checks.append(Check("pmset", "pmset", [host], "the power settings", str(exc), False, FIX_NODE))
            changes, unsupported, before = {}, list(settings), {}
        for name in sorted(n for n in settings if n not in unsupported):
            values = sorted({str(section[name]) for section in before.values() if name in section})
            found = ", ".join(f"{src} {before[src][name]}" for src in sorted(before) if name in before[src]) \
                if len(values) > 1 else values[0]
            checks.append(Check("pmset", f"pmset {name}", [host], str(settings[name]), found, name not in changes,
                                FIX_NODE))
        names = node["names"]
        for fact, key, wanted in (("computer name", "ComputerName", want["computer_name"]),
                                  ("Bonjour name", "LocalHostName", want["local_host_name"])):
            checks.append(Check("names", fact, [host], str(wanted), names.get(key) or "not set",
                                names.get(key) == wanted, FIX_NODE))
        _wired_limit(host, node["wired_limit"], want, checks)


def _automatic_updates(macs, observed, declared, checks):
    """macOS installing updates by itself would restart a Mac into a new build mid-job, and split the cluster's
    builds (which _macos compares); only `mlx-fleet os-update` should change them."""
    for host in macs:
        want = declared[host].get("automatic_macos_updates")
        found = observed[host]["mlx_fleet_node"].get("automatic_macos_updates")
        if want is None:
            continue
        words = {True: "on", False: "off", None: "not set"}
        checks.append(Check("macOS", "automatic macOS installs", [host], words[bool(want)],
                            words.get(found, str(found)), found is bool(want) if found is not None else False,
                            FIX_NODE + " (then update macOS only with mlx-fleet os-update)"))


def _mb(value) -> str:
    return "macOS's default (0)" if not value else f"{value} MB"


def _wired_limit(host, wired, want, checks):
    target, daemon = want["wired_limit_mb"], wired["daemon"]
    at_boot = f" (the LaunchDaemon sets {_mb(daemon['value_mb'])} at boot)" if daemon["present"] else ""
    checks.append(Check("wired limit", "wired limit", [host], _mb(target), _mb(wired["now_mb"]) + at_boot,
                        wired["now_mb"] == target, FIX_NODE))
    if target:
        expected = f"{daemon['path']} setting {target} MB, loaded"
        if not daemon["present"]:
            found = "absent" + (", yet loaded" if daemon["loaded"] else "")
        else:
            found = (f"sets {_mb(daemon['value_mb'])}" if not daemon.get("error") else daemon["error"]) + \
                (", loaded" if daemon["loaded"] else ", not loaded")
        ok = daemon["present"] and daemon["value_mb"] == target and daemon["loaded"]
    else:
        expected = "none (macOS's default limit)"
        found = ("present" if daemon["present"] else "absent") + (", loaded" if daemon["loaded"] else "")
        ok = not daemon["present"] and not daemon["loaded"]
    checks.append(Check("wired limit", "wired-limit LaunchDaemon", [host], expected, found, ok, FIX_NODE))


# --- the fabric -----------------------------------------------------------------------------------


def port_address_check(host: str, receptacle: int, device: str, found: list[str], want: str | None) -> Check:
    """A Thunderbolt port's addresses against the fabric's, as the audit's row (judges.port_address)."""
    drift = judges.port_address(host, receptacle, device, found, want)
    return Check("Thunderbolt addresses", f"{hardware_port(receptacle)} address", [host],
                 f"{want} ({device}, address ledger)" if want else f"none ({device})",
                 ", ".join(found) or "none", drift is None, FIX_FABRIC)


def bridge_check(host: str, bridge: dict, wanted: str) -> Check | None:
    """The Thunderbolt Bridge against mlx_fabric_bridge, as the audit's row (judges.bridge); None when it is left
    as it is."""
    if wanted not in ("disabled", "enabled"):
        return None
    drift = judges.bridge(host, bridge, wanted)
    return Check("Thunderbolt Bridge", "Thunderbolt Bridge", [host], judges.bridge_expected(bridge, wanted),
                 judges.bridge_found(bridge), drift is None, FIX_FABRIC)


def _fabric(macs, observed, declared, controller, checks):
    expected_addresses = controller["model"].port_addresses() if controller.get("model") else {}
    for host in macs:
        tb, node = observed[host]["mlx_fleet_thunderbolt"], observed[host]["mlx_fleet_node"]
        for port in tb["ports"]:
            if not port.get("device"):
                continue
            checks.append(port_address_check(host, port["receptacle"], port["device"],
                                             node["addresses"].get(port["device"], []),
                                             expected_addresses.get(Port(host, port["receptacle"]))))
        bridge = bridge_check(host, tb["bridge"], declared[host]["bridge"])
        if bridge is not None:
            checks.append(bridge)


def _rdma(macs, observed, declared, ledger, checks):
    first = declared[macs[0]]
    assessment = rdma.assess({h: observed[h]["mlx_fleet_macos"] for h in macs},
                             {h: observed[h]["mlx_fleet_thunderbolt"] for h in macs},
                             models={h: declared[h]["model"] for h in macs if declared[h].get("model")},
                             backend=first["backend"])
    rdma.note_regressions(assessment, ledger)
    for host in macs:
        node = assessment.nodes[host]
        seen = host in ledger.get("nodes", {})
        if not seen and first["backend"] not in RDMA_BACKENDS:
            continue  # never seen ready and not required: nothing declared to compare with
        why = f"last seen ready {ledger['nodes'][host]['last_seen_ready']}" if seen \
            else f"mlx_fleet_backend {first['backend']}"
        fix = FIX_RECOVERY if node.status == rdma.NEEDS_RECOVERY else node.fix
        checks.append(Check("RDMA", "RDMA", [host], f"ready ({why})", node.regression_text or node.text(),
                            node.status == rdma.READY, fix))


def _hostfiles(macs, observed, controller, checks):
    on_controller = controller.get("hostfiles") or {}
    if not on_controller.get(HOSTFILE):
        checks.append(Check("hostfiles", f"{HOSTFILE} on the controller", [CLUSTER],
                            "written by mlx-fleet converge", "none", False, FIX_CONVERGE))
        return
    for host in macs:
        on_mac = observed[host]["mlx_fleet_node"]["hostfiles"]
        for name in HOSTFILES:
            want, have = on_controller.get(name), on_mac.get(name)
            checks.append(Check("hostfiles", name, [host],
                                f"the controller's (sha256 {want[:12]})" if want else "none (the controller has none)",
                                f"sha256 {have[:12]}" if have else "none", want == have, FIX_HOSTFILE))


def _cables(macs, observed, declared, controller, checks):
    """The cables against the plan (mlx_fleet_cables), else against the last converge's cables (the model)."""
    first = declared[macs[0]]
    model = controller.get("model")
    for problem in first.get("cable_problems") or []:
        checks.append(Check("cables", "mlx_fleet_cables", [CLUSTER], "cables written 'host:port -- host:port'",
                            problem, False, "correct mlx_fleet_cables in the inventory"))
    if first.get("cables") is not None:
        plan = [Cable.from_ports(ports) for ports in first["cables"]]  # the inventory's, read by plugin_utils.declare.host
    elif model and model.links:
        plan = [link.cable for link in model.links]
    else:
        return
    if len(macs) < 2:
        return
    audited = set(macs)
    plan = [c for c in plan if {p.host for p in c.key} <= audited]
    built = fab.build_fabric({h: observed[h]["mlx_fleet_thunderbolt"] for h in macs},
                             {h: observed[h]["mlx_fleet_macos"] for h in macs},
                             models={h: declared[h]["model"] for h in macs if declared[h].get("model")},
                             cables=plan, backend=first["backend"], ip_pool=first["ip_pool"], previous=model)
    source = "mlx_fleet_cables" if first.get("cables") is not None else "as at the last converge"
    planned = {Cable(*c.key) for c in plan}  # lower end first, as the findings name them
    found = {link.cable: link for link in built.links}
    # Every planned cable, and every cable found that a finding is about (a plan finding names its cable).
    about = {cable: [f for f in built.findings if f.cable == cable] for cable in planned | found.keys()}
    for cable in sorted((c for c, flagged in about.items() if c in planned or flagged), key=lambda c: c.key):
        flagged = about[cable]
        seen = "; ".join(_cable_found(f) for f in flagged) or \
            f"cabled, {found[cable].speed_gbps if cable in found else 0:g} Gb/s"
        checks.append(Check("cables", f"cable {cable}", sorted({p.host for p in cable.key}, key=macs.index),
                            f"cabled ({source})" if cable in planned else f"not cabled ({source})", seen,
                            not any(f.fault for f in flagged), "; ".join(f.fix or f.found for f in flagged)))


def _cable_found(finding) -> str:
    """What was found about a cable, from a fabric finding's data: its kind in words ("wrong port: ...")."""
    return finding.found if finding.kind == "missing" else f"{finding.kind.replace('-', ' ')}: {finding.found}"


def _field(macs, observed, controller, checks):
    """What users' reports show goes wrong between runs (plugin_utils.judge.field_checks)."""
    in_fabric = controller["model"].port_addresses() if controller.get("model") else {}
    envs = controller.get("hostfile_envs")
    if envs is not None:
        wrong = field_checks.fast_synch(envs)
        checks.append(Check("hostfiles", f"{field_checks.FAST_SYNCH} in the hostfile's environment", [CLUSTER],
                            "unset", wrong or "unset", not wrong, field_checks.FAST_SYNCH_FIX))
    for host in macs:
        node, tb = observed[host]["mlx_fleet_node"], observed[host]["mlx_fleet_thunderbolt"]
        if "services" not in node:
            continue  # read by an older node_state
        order = field_checks.service_order(node["services"])
        checks.append(Check("network", "service order", [host], "the Thunderbolt services after the others",
                            order or "the Thunderbolt services last", not order,
                            field_checks.service_order_fix(node["services"])))
        devices = [p["device"] for p in tb["ports"] if p.get("device")]
        route = field_checks.default_route(node["default_route"], devices)
        checks.append(Check("network", "default route", [host], "not through bridge0 or a Thunderbolt port",
                            route or f"through {node['default_route'] or 'no interface (none)'}", not route,
                            field_checks.service_order_fix(node["services"])))
        for port in tb["ports"] if tb.get("rdma_enabled") else []:
            # Only the ports the fabric gave an address: a cable to a Mac outside the cluster carries no job.
            if (port.get("rdma_gids") is not None and port.get("connected") and port.get("rdma_device")
                    and Port(host, port["receptacle"]) in in_fabric):
                gid = field_checks.rdma_gid(port, port.get("addresses") or [])
                checks.append(Check("RDMA", f"{port['rdma_device']} IPv4-mapped GID", [host],
                                    "::ffff:<the port's IPv4> in ibv_devinfo -v", gid or "present", not gid,
                                    field_checks.RDMA_GID_FIX))
        locked = field_checks.filevault(node.get("filevault"))
        checks.append(Check("network", "FileVault", [host], "off (a restarted Mac comes back on the network)",
                            locked or "off", not locked, field_checks.filevault_fix(host)))
        rival = field_checks.competing(node["competing"])
        checks.append(Check("network", "other network managers", [host], "none loaded", rival or "none loaded",
                            not rival, field_checks.competing_fix(node["competing"])))


def _lock(macs, declared, lock_state, checks):
    """The lock, checked against the inventory's declaration; None when it cannot be used."""
    lock, error = lock_state
    if lock is not None and error is None:
        try:
            check_declaration(lock, declared[macs[0]]["declaration"], declared[macs[0]]["lock_file"])
        except EnvLockError as exc:
            error = str(exc)
    checks.append(Check("lock", "environment lock", [CLUSTER], "made from the inventory's declaration",
                        error or "made from it", error is None, FIX_LOCK))
    return lock if error is None else None


def _models(macs, observed, expected, checks):
    """The declared models on every Mac against their pinned files (EXPECTED: models.status.Expected's JSON), judged
    as models status judges them: one check per Mac and model as pinned, else one per file that drifted."""
    for name in expected["not_pinned"]:
        checks.append(Check("models", models_status.model_fact(name), [CLUSTER],
                            "pinned by the models' lock as declared", "not pinned", False, FIX_MODELS_LOCK,
                            kind="model-not-pinned"))
    for mac in macs:
        held = observed[mac].get("mlx_fleet_model_files") or {}
        for row in models_status.mac_rows(mac, expected["manifests"], held):
            checks += [Check("models", f["fact"], [mac], f["expected"], f["found"], False, f["fix"], kind=f["kind"])
                       for f in row["findings"]]
            if row["present"]:
                checks.append(Check("models", models_status.model_fact(row["model"]), [mac], "as pinned",
                                    "every byte verified" if row["verified"] else "present (sizes and dates checked)", True))


def run_audit(hosts: list[str], observed: dict, declared: dict, controller: dict, *, inventory: str,
              cli: bool = False) -> Audit:
    """Compare every Mac that was read (observed[host] has mlx_fleet_node) with the declared state.

    controller: {"hostfiles": {name: sha256 or None}, "hostfile_envs": hostfile.json's envs (None without one),
    "model": the last converge's cluster model (or None),
    "rdma_ledger": the RDMA ledger, "lock": (lock, None) or (None, why it cannot be read), "models": the declared
    models' pinned files (models.status.Expected's JSON; none declared without it)}, and observed[host] the Mac's
    mlx_fleet_model_files when it declares models. cli: the fixes
    name the mlx-fleet commands (the run came from the CLI) rather than the collection's playbooks.
    """
    macs = [h for h in hosts if "mlx_fleet_node" in observed.get(h, {})]
    result = Audit(macs, [h for h in hosts if h not in macs])
    if not macs:
        return result
    checks: list[Check] = []
    ledger = controller.get("rdma_ledger") or {"nodes": {}}
    lock = _lock(macs, declared, controller.get("lock", (None, "no lock")), checks)
    _macos(macs, observed, declared, checks)
    _hardware(macs, observed, declared, ledger, checks)
    _environment(macs, observed, declared, lock, checks)
    _node_settings(macs, observed, declared, checks)
    _automatic_updates(macs, observed, declared, checks)
    _fabric(macs, observed, declared, controller, checks)
    _rdma(macs, observed, declared, ledger, checks)
    _hostfiles(macs, observed, controller, checks)
    _cables(macs, observed, declared, controller, checks)
    _field(macs, observed, controller, checks)
    if controller.get("models"):
        _models(macs, observed, controller["models"], checks)
    for check in checks:
        check.fix = fixes.fill(check.fix, inventory, cli=cli) if not check.ok else ""
    result.checks = checks
    return result
