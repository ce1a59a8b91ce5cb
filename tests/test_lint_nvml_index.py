"""GPF007 on the index handed to torch (nvml_values.py): what carries an nvidia-smi/NVML index
and what does not. The traps are shapes a review found reported wrongly on correct code."""

from __future__ import annotations

import textwrap

import pytest
from gpufix.workload.lint import lint_source


def _gpf007(src: str) -> list[int]:
    found = lint_source(textwrap.dedent(src), "t.py")
    return sorted(f.line for f in found if f.rule == "GPF007")


def test_a_loop_variable_handed_to_nvml_is_an_nvml_index() -> None:
    assert _gpf007(
        """
        import GPUtil
        import pynvml
        import torch

        def pick():
            pynvml.nvmlInit()
            for i in range(pynvml.nvmlDeviceGetCount()):
                if pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(i)).used == 0:
                    torch.cuda.set_device(i)
            for g in GPUtil.getGPUs():
                torch.cuda.set_device(g.id)
            for j in range(pynvml.nvmlDeviceGetCount()):
                with torch.cuda.device(j):
                    pass
        """
    ) == [10, 12]


def test_one_mistake_is_reported_where_the_device_is_built() -> None:
    assert _gpf007(
        """
        import GPUtil
        import torch

        def main(path):
            gpu = GPUtil.getFirstAvailable(order="memory")[0]
            device = torch.device("cuda", gpu)
            torch.cuda.set_device(device)
            return torch.load(path, map_location=device)
        """
    ) == [7]


@pytest.mark.parametrize(
    "body",
    [
        # an attribute target binds nothing: `self` is no index
        "self.total = GPUtil.getGPUs()[rank].memoryTotal\ntorch.cuda.set_device(self.rank)",
        # counts and tests are the same in either order
        "n = len(GPUtil.getGPUs())\ntorch.cuda.set_device(rank % n)",
        "n = pynvml.nvmlDeviceGetCount()\nfor r in range(n):\n    torch.cuda.set_device(r)",
        'torch.device("cuda:0" if GPUtil.getAvailable() else "cpu")',
        # a name reused later for CUDA's own numbering
        "for i in GPUtil.getAvailable():\n    print(i)\nfor i in range(torch.cuda.device_count()):"
        "\n    torch.cuda.set_device(i)",
        "free = {g.id: g.memoryFree for g in GPUtil.getGPUs()}\n"
        'devs = [torch.device("cuda", g) for g in range(rank)]',
        # nvitop's CudaDevice numbers as CUDA does
        "best = min(nvitop.CudaDevice.all(), key=lambda d: d.memory_used())\n"
        "torch.cuda.set_device(best.cuda_index)",
    ],
    ids=["attribute", "len", "count", "test", "reused-loop", "reused-comprehension", "nvitop"],
)
def test_not_an_nvml_index(body: str) -> None:
    src = "import GPUtil\nimport nvitop\nimport pynvml\nimport torch\n\n\ndef f(self, rank):\n"
    assert _gpf007(src + textwrap.indent(body, "    ") + "\n") == []


def test_module_level_names_do_not_reach_functions() -> None:
    # The parent lists GPUs with NVML; each spawned rank's own `rank` is CUDA's index.
    assert (
        _gpf007(
            """
        import pynvml
        import torch
        import torch.multiprocessing as mp

        def run(rank, world_size):
            torch.cuda.set_device(rank)

        if __name__ == "__main__":
            pynvml.nvmlInit()
            world_size = pynvml.nvmlDeviceGetCount()
            for rank in range(world_size):
                print(pynvml.nvmlDeviceGetHandleByIndex(rank))
                mp.Process(target=run, args=(rank, world_size)).start()
        """
        )
        == []
    )


def test_a_deep_generated_expression_does_not_stop_the_run() -> None:
    terms = " + ".join(f'"s{i}"' for i in range(1500))
    src = f"import pynvml\nimport torch\nSQL = {terms}\ntorch.cuda.set_device(0)\n"
    assert _gpf007(src) == []


@pytest.mark.parametrize(
    ("body", "lines"),
    [
        # the binding that counts is the latest one before the use, not a later one
        ("gpu = 0\ntorch.cuda.set_device(gpu)\ngpu = GPUtil.getFirstAvailable()[0]", []),
        # a comprehension's variable does not leak: `gpu` is the parameter again
        ("loads = [gpu.load for gpu in GPUtil.getGPUs()]\ntorch.cuda.set_device(gpu)", []),
        # a test is no index
        ("ok = GPUtil.getFirstAvailable()[0] > 0\ntorch.cuda.set_device(ok)", []),
        ("idx = GPUtil.getFirstAvailable()[0]\ntorch.cuda.set_device(idx)", [9]),
    ],
    ids=["later-binding", "comprehension-scope", "comparison", "plain"],
)
def test_bindings_by_position(body: str, lines: list[int]) -> None:
    src = "import GPUtil\nimport nvitop\nimport pynvml\nimport torch\n\n\ndef f(gpu):\n"
    assert _gpf007(src + textwrap.indent(body, "    ") + "\n") == lines


def test_recursive_and_same_named_functions() -> None:
    assert (
        _gpf007(
            """
        import GPUtil
        import torch

        def pick(n):
            gpu = GPUtil.getFirstAvailable()[0] if not n else pick(n - 1)
            gpu = n
            torch.cuda.set_device(gpu)
            return gpu

        class Monitor:
            def choose(self):
                return GPUtil.getFirstAvailable()[0]

        def choose():
            return 0

        torch.cuda.set_device(choose())
        """
        )
        == []
    )


def test_a_long_chain_of_functions_does_not_stop_the_run() -> None:
    defs = "".join(f"def f{i}():\n    return f{i - 1}()\n" for i in range(1, 300))
    src = "import pynvml\nimport torch\ndef f0():\n    return pynvml.nvmlDeviceGetIndex(0)\n"
    # Followed 64 functions deep: past that the value is taken for no index (not a crash).
    assert _gpf007(src + defs + "torch.cuda.set_device(f299())\n") == []
    assert _gpf007(src + defs[: defs.index("def f20(")] + "torch.cuda.set_device(f19())\n") == [43]


def test_an_nvidia_smi_command_held_in_a_local_name() -> None:
    # deepinv#563 (recall round 5): the command is a local variable handed to subprocess.run
    assert _gpf007(
        """
        import subprocess
        import torch

        def freest():
            query = "nvidia-smi --query-gpu=memory.free --format=csv,noheader"
            if False:
                query = ["bash", "-c", query]
            out = subprocess.run(query, shell=True, capture_output=True, text=True).stdout
            free = [int(row.split()[0]) for row in out.splitlines()]
            return torch.device(f"cuda:{free.index(max(free))}")

        def other():
            query = "ls /dev"
            out = subprocess.run(query, shell=True, capture_output=True, text=True).stdout
            return torch.device(f"cuda:{len(out) % 2}")

        def third(query):
            out = subprocess.run(query, shell=True, capture_output=True, text=True).stdout
            return torch.device(f"cuda:{out.strip()}")
        """
    ) == [11]  # not `other` (no nvidia-smi) nor `third` (freest's local does not reach it)
