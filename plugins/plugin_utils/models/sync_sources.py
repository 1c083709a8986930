"""The controller's side of `mlx-fleet models sync`: the folder each model's files are read from on the controller
(a path entry's own folder; a Hub entry fetched once with huggingface_hub into the user's Hugging Face cache), the
one-shot listener that feeds the first Mac over the management network (module_utils.model_stream), and what a Mac
that fetches the Hub entries itself (mlx_fleet_models_source) needs of the controller's Hub client."""

from __future__ import annotations

import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import model_stream
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.models import ModelDeclaration
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models.hub_pin import REFUSALS, hub_refusals
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models.lock_file import ModelsLockError


def fetch_hub_entry(model: ModelDeclaration, commit: str, paths: list[str]) -> str:
    """The snapshot folder of MODEL at its pinned COMMIT holding PATHS, fetched with huggingface_hub into the user's
    own cache (HF_HUB_CACHE; HF_ENDPOINT and the user's login read by huggingface_hub, never written here); a file
    already there is not fetched again, a cut download resumes. ModelsLockError: the Hub's refusal, one line."""
    try:
        from huggingface_hub import constants, snapshot_download
    except ImportError:
        raise ModelsLockError(f"model {model.name} is a Hub model: fetching it needs the Python package "
                              "huggingface_hub on the controller (pip install huggingface_hub)") from None
    with hub_refusals(constants.ENDPOINT, model, commit):
        return snapshot_download(model.repo, repo_type=model.repo_type, revision=commit, allow_patterns=paths)


def hub_access(env_python: str) -> tuple[dict, str | None]:
    """What a Mac fetching Hub entries needs (model_copy's hub option): the Hub and the bounded waits as this
    controller's huggingface_hub has them (HF_ENDPOINT, HF_HUB_ETAG_TIMEOUT, HF_HUB_DOWNLOAD_TIMEOUT), the
    cluster's environment's interpreter ENV_PYTHON that runs huggingface_hub there, the refusals' table; and the
    user's token (HF_TOKEN or their login here, None without), for the module's no_log option only."""
    try:
        from huggingface_hub import constants, get_token
    except ImportError:
        raise ModelsLockError("mlx_fleet_models_source fetches the Hub entries on a Mac: the controller needs the "
                              "Python package huggingface_hub for the Hub's address and your login "
                              "(pip install huggingface_hub)") from None
    return ({"endpoint": constants.ENDPOINT, "etag_timeout": constants.HF_HUB_ETAG_TIMEOUT,
             "download_timeout": constants.HF_HUB_DOWNLOAD_TIMEOUT, "python": env_python,
             "refusals": [list(entry) for entry in REFUSALS]}, get_token())


def controller_folders(declared: tuple[ModelDeclaration, ...], manifests: list[dict],
                       wanted: dict[str, list[str]]) -> dict[str, str]:
    """Per model the controller sends files of (WANTED: model -> its paths), the folder they are read from."""
    by_name = {m.name: m for m in declared}
    commits = {m["name"]: m.get("commit") for m in manifests}
    return {name: (fetch_hub_entry(by_name[name], commits[name], paths) if by_name[name].is_hub
                   else str(Path(by_name[name].path).expanduser().resolve()))
            for name, paths in sorted(wanted.items())}


def address_towards(host: str) -> str:
    """This controller's address on its route to HOST, a Mac's ansible_host (the one the Mac can reach it at): the
    name resolved as ssh resolves it (`ssh -G`: its ssh_config's HostName), then the route asked; no packet is
    sent."""
    try:
        shown = subprocess.run(["ssh", "-G", host], capture_output=True, text=True, timeout=10, check=True).stdout
        host = next(line.split(" ", 1)[1] for line in shown.splitlines() if line.startswith("hostname "))
    except (OSError, subprocess.SubprocessError, StopIteration):
        pass  # no ssh here: the name as it is
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((socket.gethostbyname(host), 9))
        return probe.getsockname()[0]


@contextmanager
def first_copy_listener(mac_host: str, folders: dict[str, str], files: list[dict], token: str, timeout: int):
    """A one-shot listener on the controller's address towards MAC_HOST serving FILES ({model, path}) from
    FOLDERS to one receiver; yields (address, port). Closed on leaving, whatever happened: nothing keeps running."""
    holdings = model_stream.Holdings()
    for wanted in files:
        holdings.ready((wanted["model"], wanted["path"]), str(Path(folders[wanted["model"]]) / wanted["path"]))
    address = address_towards(mac_host)
    # No rule of silence here: the listener lives exactly as long as the task that runs the Mac's part.
    sender = model_stream.Sender([address], 0, token, holdings, 1, time.monotonic() + timeout, startup=timeout)
    try:
        yield address, sender.port
    finally:
        sender.deadline = time.monotonic()  # its threads see the deadline passed and end
        sender.wait()
