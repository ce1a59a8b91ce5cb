# source: https://github.com/xusenlinzy/api-for-open-llm/pull/23
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
