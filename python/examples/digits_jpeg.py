"""The digits-as-JPEG data set and the small CNN that ``torch_jpeg.py`` and
``benchmarks/netns_train_rank.py`` share.

The data set is made at run time from scikit-learn's digits (1797 handwritten digits of 8x8,
shipped in the wheel; no download): each image upscaled to ``side`` x ``side`` pixels, seeded
grain added (``grain``: the standard deviation, in grey levels; 0 for none) and JPEG-encoded at
a quality between 30 and 95, so records vary in size. One file per image under ``root``
(train/ and test/ folders, labels beside them). A JPEG is decoded in the Dataset to 32x32 (a
larger one by the decoder's DCT scaling first, so decoding stays cheap as records grow).
"""

from __future__ import annotations

import io
import json
import pathlib

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torch.utils.data import Dataset

HELD_OUT = 297
"""The last images of the digits, kept out of training."""
SIDE = 32
"""The side a JPEG is decoded to, whatever its size on disk."""


def make_data(root: pathlib.Path, side: int = SIDE, grain: float = 0.0) -> None:
    """Writes the JPEG digits under ``root`` (train/, test/, labels-*.npy) unless the same
    ones are there (``root/made.json`` records ``side`` and ``grain``)."""
    made = root / "made.json"
    wanted = {"side": int(side), "grain": float(grain)}
    if made.exists() and json.loads(made.read_text()) == wanted:
        return
    from sklearn.datasets import load_digits

    digits = load_digits()
    for part in ("train", "test"):
        (root / part).mkdir(parents=True, exist_ok=True)
    split = len(digits.images) - HELD_OUT
    rng = np.random.default_rng(0)
    for i, image in enumerate(digits.images):
        pixels = (image * (255 / 16)).astype(np.uint8)
        big = Image.fromarray(pixels).resize((side, side), Image.BICUBIC)
        if grain > 0:
            noisy = np.asarray(big, dtype=np.float32) + rng.normal(0, grain, (side, side))
            big = Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8))
        part, k = ("train", i) if i < split else ("test", i - split)
        big.save(root / part / f"{k:05d}.jpg", quality=30 + (i * 37) % 66)
    np.save(root / "labels-train.npy", digits.target[:split])
    np.save(root / "labels-test.npy", digits.target[split:])
    made.write_text(json.dumps(wanted))


def decode(jpeg: np.ndarray) -> torch.Tensor:
    """A JPEG's bytes as a 1x32x32 float tensor in [0, 1]."""
    with Image.open(io.BytesIO(jpeg.tobytes())) as image:
        image.draft("L", (SIDE, SIDE))
        grey = image.convert("L")
        if grey.size != (SIDE, SIDE):
            grey = grey.resize((SIDE, SIDE), Image.BILINEAR)
        return torch.from_numpy(np.asarray(grey, dtype=np.float32) / 255).unsqueeze(0)


class Digits(Dataset):
    """Training records read from ``records`` (a ``ShuffleGroup``, or anything whose ``[i]``
    is record ``i``'s bytes), decoded when read (in DataLoader worker processes)."""

    def __init__(self, records, labels: np.ndarray) -> None:
        self.records, self.labels = records, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple:
        return decode(self.records[i]), int(self.labels[i])


class Net(torch.nn.Module):
    """Two convolutions and a linear layer."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.fc = torch.nn.Linear(16 * 8 * 8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def held_out(root: pathlib.Path) -> tuple:
    """The held-out images (decoded) and their labels."""
    files = sorted((root / "test").glob("*.jpg"))
    images = torch.stack([decode(np.frombuffer(f.read_bytes(), dtype=np.uint8)) for f in files])
    return images, torch.from_numpy(np.load(root / "labels-test.npy"))
