"""Co-hosting several server instances in one process (`colocate: true`, nemo_gym.launch.colocation)."""

from nemo_gym.launch.colocation import bare_imported_modules
from tests.helpers import run_gym, running_deployment, write_config
from tests.launch_projects import counter_instance, get_status


def test_colocated_servers_share_one_process_and_each_keeps_its_port(workdir):
    # Two instances of one implementation share its modules: that is no name clash.
    (workdir / "resources_servers" / "counter" / "helpers.py").write_text("")
    config = {"first": counter_instance(), "second": counter_instance(), "colocate": True}
    with running_deployment([write_config(workdir, config)], workdir) as deployment:
        assert deployment.instances["first"]["pid"] == deployment.instances["second"]["pid"]
        assert deployment.url("first") != deployment.url("second")
        for name in ("first", "second"):
            assert get_status(deployment.url(name)) == 200
        assert deployment.wait_for_output("listening on").startswith("(colocated) ")


def test_same_named_modules_imported_by_package_can_be_co_hosted(workdir):
    """Only bare imports share one `sys.modules` entry; `resources_servers.<folder>.grading` do not clash."""
    for implementation in ("counter", "noisy"):
        folder = workdir / "resources_servers" / implementation
        (folder / "grading.py").write_text("")
        (folder / "scoring.py").write_text(f"from resources_servers.{implementation}.grading import *\n")
    config = {"first": counter_instance(), "second": counter_instance("noisy"), "colocate": True}
    result = run_gym("validate", write_config(workdir, config), "++head_server.port=0", cwd=workdir)
    assert result.returncode == 0, result.stderr


def test_only_bare_imports_of_the_folders_own_modules_can_clash(tmp_path):
    (tmp_path / "app.py").write_text("import grading\n")
    (tmp_path / "grading.py").write_text(
        "import json\nfrom tools.parse import read\nfrom .scoring import grade\n"
    )
    (tmp_path / "scoring.py").write_text("import app\nfrom resources_servers.mine.grading import grade\n")
    (tmp_path / "unused.py").write_text("")
    (tmp_path / "broken.py").write_text("import unused\ndef (:\n")
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "__init__.py").write_text("")
    assert bare_imported_modules(tmp_path, "app.py") == {"grading", "tools"}


def test_an_entrypoint_that_does_not_call_run_webserver_cannot_be_co_hosted(workdir):
    folder = workdir / "resources_servers" / "plain"
    folder.mkdir()
    (folder / "app.py").write_text("print('set up, but never served')\n")
    config = {"first": counter_instance(), "second": counter_instance("plain"), "colocate": True}
    result = run_gym("run", write_config(workdir, config), "++head_server.port=0", cwd=workdir)
    assert result.returncode == 1
    assert (
        "server instance 'second': app.py did not call run_webserver() once when run as __main__, so it "
        "cannot be co-hosted; set colocate: false" in result.stderr
    ), result.stderr
    assert "Traceback" not in result.stdout + result.stderr
