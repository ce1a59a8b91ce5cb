# source: https://github.com/LostRuins/koboldcpp/issues/1023
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import argparse
import ctypes
import os

CUDevicesNames = ["", "", "", "", ""]
args = None
handle = None


def init_library():
    global handle
    handle = ctypes.CDLL(os.path.join(os.path.dirname(__file__), "koboldcpp_cublas.so"))


def set_backend_props(inputs):
    inputs.cublas_info = 0
    if not args.tensor_split:
        if args.usecublas and "0" in args.usecublas:
            os.environ["CUDA_VISIBLE_DEVICES"] = "0"  # expect: GPF007
            os.environ["HIP_VISIBLE_DEVICES"] = "0"
        elif args.usecublas and "1" in args.usecublas:
            os.environ["CUDA_VISIBLE_DEVICES"] = "1"  # expect: GPF007
            os.environ["HIP_VISIBLE_DEVICES"] = "1"
        elif args.usecublas and "2" in args.usecublas:
            os.environ["CUDA_VISIBLE_DEVICES"] = "2"  # expect: GPF007
            os.environ["HIP_VISIBLE_DEVICES"] = "2"
        elif args.usecublas and "3" in args.usecublas:
            os.environ["CUDA_VISIBLE_DEVICES"] = "3"  # expect: GPF007
            os.environ["HIP_VISIBLE_DEVICES"] = "3"
    return inputs


def fetch_gpu_properties(testCL, testCU, testVK):
    import subprocess

    if testCU:
        try:  # Get NVIDIA GPU names, in nvidia-smi's order: the launcher's GPU ids
            output = subprocess.run(
                ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                check=True,
                encoding="utf-8",
            ).stdout
            FetchedCUdevices = [line.split(",")[0].strip() for line in output.splitlines()]
            for idx in range(min(len(FetchedCUdevices), len(CUDevicesNames))):
                CUDevicesNames[idx] = FetchedCUdevices[idx]
        except Exception:
            pass


def load_model(model_filename):
    class Inputs:
        pass

    inputs = set_backend_props(Inputs())
    return handle, inputs, model_filename


def main(launch_args):
    global args
    args = launch_args
    fetch_gpu_properties(False, True, True)
    init_library()
    load_model(args.model_param)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("model_param", nargs="?", default="")
    parser.add_argument("--usecublas", nargs="*")
    parser.add_argument("--tensor_split", nargs="+", type=float)
    main(parser.parse_args())
