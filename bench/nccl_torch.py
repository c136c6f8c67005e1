#!/usr/bin/env python3
"""bench/nccl_torch.py: all-reduce bus bandwidth of torch.distributed with the NCCL backend, one process per GPU
(torch.multiprocessing.spawn), measured as bench/nccl_bench.lua measures cd.nccl: float32, in place, sum;
bus bandwidth = 2(n-1)/n x bytes / time.

    python3 bench/nccl_torch.py [BYTES [SAMPLES]]     default 1 GiB per GPU, 20 samples

The result is checked first (each rank holds rank + 1; the sum must be n(n+1)/2 everywhere); then, after
warm-up, each sample times PER_SAMPLE back-to-back all-reduces after a barrier (then the GPU synchronized), rank
0's median sample is reported. Prints "needs 2+ GPUs" and exits 0 with fewer; the last line is machine-readable:
    RESULT torch busbw=<GB/s> time_ms=<ms> gpus=<n> bytes=<bytes> nccl=<version> ok=<true|false>
NVLink multicast stays off: NCCL_NVLS_ENABLE=0 is set for the workers unless already set.
"""
import os
import socket
import statistics
import sys
import time

PER_SAMPLE, WARMUP = 5, 5


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, world, nbytes, samples, port, queue):
    import torch
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
    count = nbytes // 4
    x = torch.full((count,), float(rank + 1), device=dev, dtype=torch.float32)
    dist.all_reduce(x)
    torch.cuda.synchronize()
    want = world * (world + 1) // 2
    ok = bool((x == want).all().item())
    x.zero_()
    for _ in range(WARMUP):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    times = []
    for _ in range(samples):
        dist.barrier(device_ids=[rank])
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(PER_SAMPLE):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) / PER_SAMPLE)
    oks = [None] * world
    dist.all_gather_object(oks, ok)
    if rank == 0:
        version = ".".join(str(v) for v in torch.cuda.nccl.version())
        queue.put((all(oks), times, version, torch.__version__))
    dist.destroy_process_group()


def main():
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    nbytes = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 30
    samples = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    try:
        import torch
        import torch.multiprocessing as mp
    except ImportError as e:
        print(f"nccl_torch: no PyTorch ({e})")
        return 0
    world = torch.cuda.device_count()
    if world < 2:
        print(f"nccl_torch: needs 2+ GPUs (found {world})")
        return 0
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.spawn(worker, args=(world, nbytes, samples, free_port(), queue), nprocs=world, join=True)
    ok, times, version, torch_version = queue.get()
    median = statistics.median(times)
    count_bytes = nbytes // 4 * 4
    algbw = count_bytes / median / 1e9
    busbw = algbw * 2 * (world - 1) / world
    print(f"nccl_torch: torch {torch_version} torch.distributed all_reduce float32 {count_bytes / 2**30:.2f} GiB on "
          f"{world} GPUs (one process each): median {median * 1e3:.3f} ms of {samples} samples (min "
          f"{min(times) * 1e3:.3f}, max {max(times) * 1e3:.3f}), algbw {algbw:.1f} GB/s, busbw {busbw:.1f} GB/s, "
          f"NCCL {version}, {'checked' if ok else 'WRONG RESULT'}")
    print(f"RESULT torch busbw={busbw:.2f} time_ms={median * 1e3:.4f} gpus={world} bytes={count_bytes} "
          f"nccl={version} ok={'true' if ok else 'false'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
