# source: https://github.com/walkerning/aw_nas/pull/17
