"""ml_stack from an offline wheelhouse of STAND-IN wheels, on the bionic-identity container.

The wheelhouse also holds decoys (torch 2.1.2+cpu and 2.2.0+cu121, transformers 4.37.0,
accelerate 0.26.0): only exact pins give the versions asserted here.
"""

import json

VENV = "/opt/gpufix/venv"


def test_venv_built_with_the_chosen_interpreter(host):
    cfg = host.file(f"{VENV}/pyvenv.cfg")
    assert cfg.exists
    assert cfg.contains("^home = /usr/bin$")


def test_the_role_installed_python3_venv(host):
    # The bare image lacks it; prepare.yml only offers Debian's real package as a source.
    assert host.package("python3-venv").is_installed
    assert host.package("python3.11-venv").is_installed
    assert host.package("ca-certificates").is_installed  # python3-pip-whl's real dependency


def test_constraints_written_next_to_the_venv(host):
    f = host.file(f"{VENV}/gpufix-constraints.txt")
    assert f.mode == 0o644
    pins = [ln for ln in f.content_string.splitlines() if ln and not ln.startswith("#")]
    # torch 2.1 predates NumPy 2 support (torch 2.3): NumPy is capped below 2
    assert pins == ["torch==2.1.2+cu121", "transformers==4.36.2", "accelerate==0.25.0", "numpy<2"]


def test_imports_report_the_exact_versions(host):
    out = host.check_output(
        f'{VENV}/bin/python -c "import json, torch, transformers, accelerate; '
        "print(json.dumps([torch.__version__, torch.version.cuda, transformers.__version__, "
        'accelerate.__version__, torch.GPUFIX_STAND_IN]))"'
    )
    assert json.loads(out) == ["2.1.2+cu121", "12.1", "4.36.2", "0.25.0", True]


def test_no_decoy_installed(host):
    freeze = host.check_output(f"{VENV}/bin/python -m pip freeze").splitlines()
    assert "torch==2.1.2+cu121" in freeze
    assert not [ln for ln in freeze if ln.startswith(("torch==2.2", "torch==2.1.2+cpu"))]
    assert "transformers==4.36.2" in freeze
    assert "accelerate==0.25.0" in freeze


def test_index_mode_took_torchs_dependency_from_pytorchs_index(host):
    # side_effect.yml: the "PyPI" index offers gpufix-standin-triton 9.9.9 beside PyTorch's 2.1.0.
    freeze = host.check_output("/opt/gpufix/venv-indexes/bin/python -m pip freeze").split()
    assert "gpufix_standin_triton==2.1.0" in freeze or "gpufix-standin-triton==2.1.0" in freeze
    assert "torch==2.1.2+cu121" in freeze
    assert "transformers==4.36.2" in freeze and "accelerate==0.25.0" in freeze
    # side_effect.yml: the index offers NumPy 2.0.0 and a pip run put it there by hand; the
    # role's constraint took 1.26.4 and its next run moved 2.0.0 back down
    assert "numpy==1.26.4" in freeze


def test_a_dependency_pytorchs_index_lacks_came_from_the_package_index(host):
    # side_effect.yml: the cu118 stand-in requires gpufix-standin-typing, which only "PyPI" has,
    # and pins gpufix-standin-triton==2.1.0, which both have (PyPI also a 9.9.9)
    freeze = host.check_output("/opt/gpufix/venv-fallback/bin/python -m pip freeze").split()
    names = {line.split("==")[0].replace("_", "-"): line.split("==")[1] for line in freeze}
    assert names["torch"] == "2.1.2+cu118"
    assert names["gpufix-standin-typing"] == "4.12.2"
    assert names["gpufix-standin-triton"] == "2.1.0"
    assert names["transformers"] == "4.36.2" and names["accelerate"] == "0.25.0"
