# source: https://github.com/deepspeedai/DeepSpeedExamples/pull/931
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import argparse

import deepspeed
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
import torchvision.transforms as transforms
from deepspeed.accelerator import get_accelerator


def add_argument():
    parser = argparse.ArgumentParser(description="CIFAR")
    parser.add_argument("--local_rank", type=int, default=-1)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--log-interval", type=int, default=2000)
    parser = deepspeed.add_config_arguments(parser)
    return parser.parse_args()


def get_ds_config(args):
    return {
        "train_batch_size": 16,
        "optimizer": {"type": "Adam", "params": {"lr": 0.001}},
    }


class Net(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.fc1 = nn.Linear(6 * 14 * 14, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        return self.fc1(torch.flatten(x, 1))


def test(model_engine, testset, local_device, target_dtype, test_batch_size=4):
    testloader = torch.utils.data.DataLoader(testset, batch_size=test_batch_size)
    correct, total = 0, 0
    model_engine.eval()
    with torch.no_grad():
        for images, labels in testloader:
            if target_dtype != None:
                images = images.to(target_dtype)
            outputs = model_engine(images.to(local_device))
            _, predicted = torch.max(outputs.data, 1)
            total += labels.size(0)
            correct += (predicted == labels.to(local_device)).sum().item()
    if model_engine.local_rank == 0:
        print(f"Accuracy: {100 * correct / total}")


def main(args):
    # Initialize DeepSpeed distributed backend.
    deepspeed.init_distributed()  # expect: GPF006

    transform = transforms.Compose([transforms.ToTensor()])

    if torch.distributed.get_rank() != 0:
        # let rank 0 download first
        torch.distributed.barrier()

    trainset = torchvision.datasets.CIFAR10(
        root="./data", train=True, download=True, transform=transform
    )
    testset = torchvision.datasets.CIFAR10(
        root="./data", train=False, download=True, transform=transform
    )

    if torch.distributed.get_rank() == 0:
        torch.distributed.barrier()

    net = Net(args)
    parameters = filter(lambda p: p.requires_grad, net.parameters())
    ds_config = get_ds_config(args)
    model_engine, optimizer, trainloader, __ = deepspeed.initialize(
        args=args,
        model=net,
        model_parameters=parameters,
        training_data=trainset,
        config=ds_config,
    )

    local_device = get_accelerator().device_name(model_engine.local_rank)
    local_rank = model_engine.local_rank

    target_dtype = None
    if model_engine.bfloat16_enabled():
        target_dtype = torch.bfloat16
    elif model_engine.fp16_enabled():
        target_dtype = torch.half

    criterion = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        running_loss = 0.0
        for i, data in enumerate(trainloader):
            inputs, labels = data[0].to(local_device), data[1].to(local_device)
            if target_dtype != None:
                inputs = inputs.to(target_dtype)
            outputs = model_engine(inputs)
            loss = criterion(outputs, labels)
            model_engine.backward(loss)
            model_engine.step()
            running_loss += loss.item()
            if local_rank == 0 and i % args.log_interval == (args.log_interval - 1):
                print(f"[{epoch + 1}, {i + 1}] loss: {running_loss / args.log_interval:.3f}")
                running_loss = 0.0
    print("Finished Training")

    test(model_engine, testset, local_device, target_dtype)


if __name__ == "__main__":
    args = add_argument()
    main(args)
