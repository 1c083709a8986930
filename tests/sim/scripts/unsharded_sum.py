"""examples/matrix_sum.py with a classic bug: every rank sums every row (no sharding), so the
cluster's result is the rank count times the single Mac's."""

import json

import mlx.core as mx

group = mx.distributed.init()
mx.random.seed(0)
matrix = mx.random.uniform(shape=(256, 64))
column_sums = mx.distributed.all_sum(matrix.sum(axis=0), group=group)
print(json.dumps({"sum": column_sums.sum().item(), "column_sums": column_sums[:4].tolist()}), flush=True)
