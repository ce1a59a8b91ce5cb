# source: https://github.com/modelscope/ms-swift/pull/41
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
from .model import get_model_tokenizer
from .utils import broadcast_string, get_dist_setting, is_dist, is_master
