"""A job for mlx-fleet run's sim tests: all_sum over every rank, printed per rank; then, as asked, one rank exits
with a status or goes silent (sleeps: no output, no CPU time), and the others keep printing for --seconds."""

import argparse
import sys
import time

import mlx.core as mx

parser = argparse.ArgumentParser()
parser.add_argument("--exit-rank", type=int)
parser.add_argument("--exit-code", type=int, default=0)
parser.add_argument("--silent-rank", type=int)
parser.add_argument("--seconds", type=float, default=0)
args = parser.parse_args()

group = mx.distributed.init(strict=True)
rank = group.rank()
total = mx.distributed.all_sum(mx.array([float(rank + 1)]))
mx.eval(total)
print(f"rank {rank} of {group.size()}: all_sum={total.item():g}", flush=True)
if rank == args.exit_rank:
    sys.exit(args.exit_code)
if rank == args.silent_rank:
    time.sleep(10 ** 6)
ends = time.monotonic() + args.seconds
while time.monotonic() < ends:
    print(f"rank {rank} working", flush=True)
    time.sleep(1)
