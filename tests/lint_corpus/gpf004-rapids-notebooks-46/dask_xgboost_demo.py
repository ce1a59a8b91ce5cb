# source: https://github.com/rapidsai/notebooks/pull/46
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os

os.environ["NCCL_P2P_DISABLE"] = "1"  # expect: GPF004

import dask_xgboost


def train(client, params, x, y):
    return dask_xgboost.train(client, params, x, y, num_boost_round=10)
