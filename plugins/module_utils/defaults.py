# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""The cluster's defaults, spelled once: what a variable the inventory leaves out means.

Python reads them from here (the action plugins, the CLI, the modules' argument specs). The roles'
defaults files and argument specs say the same for the variables the roles read
(``mlx_fabric_output_dir``, ``mlx_fabric_hostfile_dir``, ``macos_node_wired_limit_label``), and
tests/unit/test_defaults.py pins them equal to these, so the two cannot drift.
In module_utils because the modules need some of them on the Mac (the wired-limit label, the
hostfile folder): stdlib only, Python 3.9; the controller's code imports them from here too.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

BACKEND = "auto"  # mlx_fleet_backend: the fabric picks the backend the cables and the Macs can carry
MIN_MACOS = "26.2"  # mlx_fleet_min_macos: the preflight's lowest accepted macOS
IP_POOL = "192.168.0.0/16"  # mlx_fleet_ip_pool: where each cable's /30 comes from, when it is free here
# mlx_fleet_output_dir: this folder in the inventory's folder (hidden, so Ansible never reads it as inventory).
OUTPUT_DIR_NAME = ".mlx-fleet"
HOSTFILE_DIR = "/opt/mlx-fleet"  # mlx_fabric_hostfile_dir: where every Mac gets the hostfiles
WIRED_LIMIT_LABEL = "org.mlx-fleet.wired-limit"  # macos_node_wired_limit_label: the LaunchDaemon's label
CLUSTER_GROUP = "mlx_cluster"  # the inventory group of the cluster's Macs
# mlx_fleet_models_hf_cache and mlx_fleet_models_dir: where every Mac keeps the declared models (Hub entries in a
# Hugging Face cache, path entries in a folder each); the model_files_facts module reads there.
MODELS_HF_CACHE = "/opt/mlx-fleet/huggingface/hub"
MODELS_DIR = "/opt/mlx-fleet/models"
# mlx_fleet_models_source: the Mac that fetches the Hub entries from the Hub; empty: the controller fetches them.
MODELS_SOURCE = ""
# mlx_fleet_models_port: the TCP port a Mac's one-shot listener takes on its cables' addresses during a models sync.
MODELS_SYNC_PORT = 47181
