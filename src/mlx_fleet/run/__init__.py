"""`mlx-fleet run`: a job on every rank of the published hostfile, through mlx.launch (docs/run.md)."""
