"""Wall-clock timing that is honest on CUDA: the device is synchronised before each reading."""

from __future__ import annotations

import time

import torch


class DeviceClock:
    """perf_counter readings taken after all queued device work has finished."""

    def __init__(self, device: torch.device | str):
        self.cuda = torch.device(device).type == "cuda"

    def now(self) -> float:
        if self.cuda:
            torch.cuda.synchronize()
        return time.perf_counter()
