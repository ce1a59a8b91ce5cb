# source: https://github.com/deepinv/deepinv/issues/563
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
