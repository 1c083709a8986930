#!/bin/sh
# Ansible inventory script: the simulated cluster create.yml brings up, as Ansible JSON.
# Empty until the cluster exists, so molecule can run before create.
project=$(dirname "$(readlink -f "$0")")/../..
exec "$project/.venv/bin/python" -c '
import json, pathlib, sys, yaml
path = pathlib.Path(sys.argv[1]) / "inventory.yml"
out = {"_meta": {"hostvars": {}}}
if path.exists():
    for name, group in yaml.safe_load(path.read_text())["all"]["children"].items():
        out[name] = {"hosts": list(group["hosts"]), "vars": group["vars"]}
        out["_meta"]["hostvars"].update(group["hosts"])
print(json.dumps(out))
' "${MLX_FLEET_SIM_DIR:-$project/.sim/molecule-default}"
