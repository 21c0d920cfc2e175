"""scripts/setup.sh on an Ubuntu Neuron DLAMI and elsewhere (issue 39 item 6), in its dry-run
mode against a fake /etc/os-release: which interpreter it embeds and which packages it asks for."""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SCRIPT = os.path.join(ROOT, "scripts", "setup.sh")


def _dry_run(os_id, **env):
    with tempfile.TemporaryDirectory() as tmp:
        release = os.path.join(tmp, "os-release")
        with open(release, "w", encoding="utf-8") as handle:
            handle.write(f"ID={os_id}\nVERSION_ID=\"22.04\"\n")
        full = dict(os.environ, SETUP_OS_RELEASE=release, SETUP_DRY_RUN="1", VIRTUAL_ENV="", **env)
        if "ACCEL_PYTHON" not in env:
            full.pop("ACCEL_PYTHON", None)
        return subprocess.run(["bash", SCRIPT], capture_output=True, text=True, env=full, timeout=60, check=False)


def test_ubuntu_dlami_embeds_the_neuron_venv_and_asks_for_ubuntu_packages():
    with tempfile.TemporaryDirectory() as tmp:
        venv = os.path.join(tmp, "aws_neuronx_venv_pytorch_2_8")
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=60)
        proc = _dry_run("ubuntu", ACCEL_PYTHON=os.path.join(venv, "bin", "python3"))
    assert proc.returncode == 0, proc.stderr
    assert f"embedded Python {venv}/bin/python3" in proc.stdout
    packages = proc.stdout.split("setup: packages:", 1)[1].splitlines()[0].split()
    major, minor = sys.version_info[:2]
    assert f"python{major}.{minor}-dev" in packages  # the venv interpreter's own headers
    assert "python3-numpy" not in packages  # the venv has its own NumPy
    assert "chromium" not in packages and "python3-torch" not in packages  # snap / not packaged on Ubuntu


def test_debian_keeps_its_packages():
    proc = _dry_run("debian")
    assert proc.returncode == 0, proc.stderr
    packages = proc.stdout.split("setup: packages:", 1)[1].splitlines()[0].split()
    assert "chromium" in packages and "python3-torch" in packages


def test_amazon_linux_is_refused_with_where_to_look():
    proc = _dry_run("amzn")
    assert proc.returncode == 2
    assert "docs/trainium.md" in proc.stderr
