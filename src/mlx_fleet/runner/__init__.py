"""Run the collection's playbooks for the CLI through ansible-runner, follow them through the event
stream, and sum them up for a person.

The collection is found where Python imports it from (the wheel installs it as
site-packages/ansible_collections/mlx_fleet/cluster; a clone has collections/ on sys.path), and the
playbooks run by their FQCN (``mlx_fleet.cluster.hostfile``), with the ansible.cfg shipped in this
package unless the user names one in ANSIBLE_CONFIG.

Split as ansible-runner splits itself: config (what a run is given), run (running it), events (following
it through its event stream), progress (what a person sees: the live line and the summary). This module
is the package's interface for the CLI's commands.
"""

from mlx_fleet.runner.config import (
                                     PlaybookOptions,
                                     add_playbook_options,
                                     ansible_config,
                                     collections_path,
                                     default_output_dir,
                                     options_from,
                                     output_dir_from,
                                     output_extravars,
)
from mlx_fleet.runner.events import RunReport
from mlx_fleet.runner.progress import print_converge_summary, print_summary
from mlx_fleet.runner.run import run_playbook

__all__ = ["PlaybookOptions", "RunReport", "add_playbook_options", "ansible_config", "collections_path",
           "default_output_dir", "options_from", "output_dir_from", "output_extravars", "print_converge_summary",
           "print_summary", "run_playbook"]
