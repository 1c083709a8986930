"""A small task for `mlx-fleet verify --script`: the sum of a seeded random matrix.

Every rank makes the same matrix from the seed, sums its own share of the rows, and all_sum puts the
shares together; on one Mac the one rank sums every row. Both must print the same numbers, up to the
rounding of adding in another order (well inside verify's default rtol 1e-5):

    mlx-fleet verify -i INVENTORY --script examples/matrix_sum.py --args --rows 4096 --cols 1024

It prints one JSON line: {"sum": total, "column_sums": [the first 8 column sums]}.
"""

import argparse
import json

import mlx.core as mx

parser = argparse.ArgumentParser()
parser.add_argument("--rows", type=int, default=2048)
parser.add_argument("--cols", type=int, default=512)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

group = mx.distributed.init()
mx.random.seed(args.seed)
matrix = mx.random.uniform(shape=(args.rows, args.cols))  # positive: no cancellation in the sums
start = group.rank() * args.rows // group.size()
stop = (group.rank() + 1) * args.rows // group.size()
column_sums = mx.distributed.all_sum(matrix[start:stop].sum(axis=0), group=group)
print(json.dumps({"sum": column_sums.sum().item(), "column_sums": column_sums[:8].tolist()}), flush=True)
