# source: https://github.com/bamos/setGPU/issues/1
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os

import gpustat

stats = gpustat.GPUStatCollection.new_query()
ids = map(lambda gpu: int(gpu.entry["index"]), stats)
ratios = map(lambda gpu: float(gpu.entry["memory.used"]) / float(gpu.entry["memory.total"]), stats)
best = min(zip(ids, ratios), key=lambda x: x[1])[0]

print("setGPU: Setting GPU to: {}".format(best))
os.environ["CUDA_VISIBLE_DEVICES"] = str(best)  # expect: GPF007
