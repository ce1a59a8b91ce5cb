# source: https://github.com/stanfordnlp/pyvene/pull/98
