"""`mlx-fleet verify`: does the cluster work? Every rank, every cable, and the user's own task (docs/verify.md)."""
