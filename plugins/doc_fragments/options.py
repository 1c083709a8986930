# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""Options several of the collection's modules and action plugins share."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # Controller-side plugins that judge every Mac of the cluster group.
    DOCUMENTATION = r"""
options:
  group:
    description: The inventory group holding the cluster's Macs; its order is the rank order.
    type: str
    default: mlx_cluster
"""

    # The node-side halves of the mlx_env role.
    MLX_ENV = r"""
options:
  path:
    description: The venv's absolute path, the same on every Mac.
    type: path
    required: true
  store:
    description: Where the pushed wheels, uv and Python builds live on the Mac.
    type: path
    required: true
"""

    # Where a Mac keeps the declared models (the modules that read or write them).
    MODELS = r"""
options:
  hf_cache:
    description: The Hugging Face cache of the Hub entries (C(mlx_fleet_models_hf_cache)).
    type: path
    default: /opt/mlx-fleet/huggingface/hub
  models_dir:
    description: The folder of the path entries (C(mlx_fleet_models_dir)).
    type: path
    default: /opt/mlx-fleet/models
"""

    # The models' controller steps: the cluster's output folder and the pinned manifests they judge.
    MODELS_STEP = r"""
options:
  output_dir:
    description: The cluster's output folder (C(mlx_fleet_output_dir)), holding the cluster model and the records.
    type: path
    required: true
  expected:
    description: The registered result of M(mlx_fleet.cluster.models_manifest).
    type: dict
    required: true
"""
