"""mlx-fleet: converge Apple Silicon Macs into an MLX distributed cluster."""

__version__ = "0.2.0"
