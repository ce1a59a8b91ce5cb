"""cuda role: 11.8 installed and active although 12.1 (higher priority) is installed too."""


def test_toolkits_installed(host):
    assert host.package("cuda-toolkit-11-8").is_installed
    assert host.package("cuda-toolkit-12-1").is_installed


def test_usr_local_cuda_is_11_8_in_manual_mode(host):
    assert host.file("/usr/local/cuda").linked_to == "/usr/local/cuda-11.8"
    query = host.check_output("update-alternatives --query cuda").splitlines()
    assert "Status: manual" in query
    assert "Value: /usr/local/cuda-11.8" in query


def test_login_shell_finds_nvcc(host):
    out = host.check_output("bash -lc 'command -v nvcc && nvcc --version'")
    assert "/usr/local/cuda/bin/nvcc" in out
    assert "release 11.8" in out


def test_profile_snippet_is_managed(host):
    snippet = host.file("/etc/profile.d/gpufix-cuda.sh")
    assert snippet.mode == 0o644
    assert snippet.contains("Ansible managed")
