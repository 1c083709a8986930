"""Put the Ansible collection into the wheel as ansible_collections/mlx_fleet/cluster.

Only for a standard wheel: an editable install (a clone) reaches the collection through collections/,
which pyproject's dev-mode-dirs puts on sys.path, so edits in the clone take effect at once."""

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

COLLECTION = "ansible_collections/mlx_fleet/cluster"
# The collection's content; local state (.sim, .mlx-fleet, build/, caches) lives elsewhere and never ships.
CONTENT = ("galaxy.yml", "README.md", "meta", "playbooks", "plugins", "roles")


class CollectionHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version, build_data):
        if version == "editable":
            return
        for path in CONTENT:
            build_data["force_include"][path] = f"{COLLECTION}/{path}"
