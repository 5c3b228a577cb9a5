"""The training of samples/fashion_mnist.lua (`make demo`) written in PyTorch CPU, for bench_cpu.lua's
`demo` case.

    python3 tests/bench/fashion_mnist_torch.py DIR [--threads N] [--epochs 3] [--batch-size 128]
                                               [--lr 0.002] [--seed 1]

DIR holds the four Fashion-MNIST idx files (.gz or plain; netcl.data.fashion_mnist_dir() finds
Debian's). --threads: torch.set_num_threads (default: the CPUs this process may run on, which
is netcl's default with no thread variables set).

The same work as the sample: Conv-BN-ReLU-pool twice, Dropout 0.2, Linear 1568->128, ReLU,
Linear 128->10 (PyTorch's default initialization, which netcl's layers copy); Adam with the
learning rate on a cosine from --lr to 0 over all steps, stepped per batch; shuffled batches
(the last one short), each normalized from uint8 as it is taken ((x / 255 - 0.2860) / 0.3530,
netcl.data.normalize_fashion_mnist); after each epoch the test accuracy in batches of 1000 in
eval mode. The time of an epoch runs, as in the sample, from before its first batch to after its
evaluation; train_s is the sum over epochs (the sample's "s of training"). Prints one JSON line.
"""
import argparse
import gzip
import json
import math
import os
import sys
import time

import torch

MEAN, STD = 0.2860, 0.3530
FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
         "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def idx_path(folder, base):
    # the names as distributed and as some mirrors spell them, as netcl.data.mnist looks for them
    dotted = base.replace("-idx", ".idx")
    for name in (base, base + ".gz", dotted, dotted + ".gz"):
        path = os.path.join(folder, name)
        if os.path.exists(path):
            return path
    sys.exit("fashion_mnist_torch: %s: no %s or %s.gz" % (folder, base, base))


def read_idx(path):
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        raw = f.read()
    if raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        sys.exit("fashion_mnist_torch: %s is not an idx file of uint8" % path)
    ndim = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    body = bytearray(raw[4 + 4 * ndim:])
    if len(body) != math.prod(shape):
        sys.exit("fashion_mnist_torch: %s: %d bytes of data for shape %s" % (path, len(body), shape))
    return torch.frombuffer(body, dtype=torch.uint8).reshape(shape)


def load(folder, split):
    images, labels = (read_idx(idx_path(folder, f)) for f in FILES[split])
    return images.reshape(images.shape[0], 1, images.shape[1], images.shape[2]), labels.to(torch.int64)


def normalize(x):
    return x.to(torch.float32) * (1 / (255 * STD)) - MEAN / STD


def build_model():
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Dropout(0.2), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def evaluate(model, x, y, batch=1000):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, x.shape[0], batch):
            correct += (model(normalize(x[i:i + batch])).argmax(1) == y[i:i + batch]).sum()
    model.train()
    return int(correct) / x.shape[0]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data", help="directory with the four Fashion-MNIST idx files")
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=0.002)
    p.add_argument("--seed", type=int, default=1)
    o = p.parse_args()
    if o.threads < 1 or o.epochs < 1 or o.batch_size < 1:
        p.error("--threads, --epochs and --batch-size must be at least 1")
    torch.set_num_threads(o.threads)

    xtr, ytr = load(o.data, "train")
    xte, yte = load(o.data, "test")
    torch.manual_seed(o.seed)
    model = build_model()
    opt = torch.optim.Adam(model.parameters(), lr=o.lr)
    n, b = xtr.shape[0], o.batch_size
    steps_per_epoch = (n + b - 1) // b  # the last batch short, as the sample's loader (no drop_last)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=o.epochs * steps_per_epoch)
    shuffle = torch.Generator()

    train_s, losses, accuracies = 0.0, [], []
    for epoch in range(1, o.epochs + 1):
        # the sample reseeds per epoch: the shuffle from (seed, epoch), dropout from seed * 1000 + epoch
        shuffle.manual_seed(o.seed * 1000003 + epoch)
        torch.manual_seed(o.seed * 1000 + epoch)
        start = time.perf_counter()
        perm = torch.randperm(n, generator=shuffle)
        loss_sum = torch.zeros(())
        for i in range(0, n, b):
            idx = perm[i:i + b]
            x, y = normalize(xtr[idx]), ytr[idx]
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            loss_sum += loss.detach()
        acc = evaluate(model, xte, yte)
        train_s += time.perf_counter() - start
        losses.append(round(loss_sum.item() / steps_per_epoch, 4))
        accuracies.append(acc)
    print(json.dumps({"train_s": round(train_s, 3), "test_accuracy": accuracies[-1], "epochs": o.epochs,
                      "threads": torch.get_num_threads(), "train_loss": losses, "epoch_accuracy": accuracies,
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
