"""The program the compile benchmarks time: one torch.compile of a small
model, run once. It never imports torch_backports."""

import torch


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(32, 64)
        self.b = torch.nn.Linear(64, 8)

    def forward(self, x):
        return self.b(torch.relu(self.a(x))).softmax(-1)


torch.manual_seed(0)
model = torch.compile(Small())
model(torch.randn(4, 32)).sum().item()
