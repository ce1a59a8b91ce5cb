# source: https://github.com/Theano/Theano/issues/6023
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os
import subprocess


def free_gpus():
    out = subprocess.check_output(
        ["nvidia-smi", "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"]
    ).decode()
    rows = [line.split(",") for line in out.strip().splitlines()]
    return [int(i) for i, used in rows if int(used) < 100]


def choose():
    gpus = free_gpus()
    os.environ["CUDA_VISIBLE_DEVICES"] = str(gpus[0])  # expect: GPF007


choose()
