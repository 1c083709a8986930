"""What a converged simulated Mac must show, read with testinfra over the same SSH as Ansible."""


def test_macos_tools_answer_as_a_mac(host):
    assert host.check_output("sw_vers -productVersion").startswith("26.")


def test_node_never_sleeps_and_restarts_after_power_loss(host):
    settings = dict(line.split(None, 1) for line in host.check_output("pmset -g custom").splitlines()
                    if line.startswith(" ") and len(line.split(None, 1)) == 2)
    assert settings["sleep"].strip() == "0"
    assert settings["autorestart"].strip() == "1"


def test_computer_name_is_the_inventory_name(host):
    assert host.check_output("scutil --get ComputerName") == host.backend.get_hostname()


def test_mlx_environment_imports_mlx(host):
    out = host.check_output("/opt/mlx-fleet/venv/bin/python -c 'import mlx.core as mx; print(mx.__version__)'")
    assert out.strip() == "0.32.4"
