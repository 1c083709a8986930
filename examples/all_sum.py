"""Smallest useful MLX distributed job: every rank adds its rank+1; all must agree on the total.

Run it with mlx.launch, e.g.
    mlx.launch --hostfile ring.json --backend ring -- /path/to/python examples/all_sum.py
"""

import mlx.core as mx

group = mx.distributed.init(strict=True)
total = mx.distributed.all_sum(mx.array([float(group.rank() + 1)]))
mx.eval(total)
expected = group.size() * (group.size() + 1) / 2
print(f"rank {group.rank()} of {group.size()}: all_sum={total.item():g} expected={expected:g}", flush=True)
raise SystemExit(0 if total.item() == expected else 1)
