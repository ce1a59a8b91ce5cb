# source: https://github.com/pytorch/examples/issues/343
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(784, 10)

    def forward(self, x):
        return F.log_softmax(self.fc(x.flatten(1)), dim=1)


def main():
    device = torch.device("cuda")
    model = Net()
    model = nn.DataParallel(model, device_ids=[0, 1]).to(device)  # expect: GPF002
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(5):
        data = torch.randn(64, 1, 28, 28, device=device)
        loss = F.nll_loss(model(data), torch.zeros(64, dtype=torch.long, device=device))
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
