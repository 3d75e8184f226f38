"""Co-hosting several server instances in one process (`colocate: true`, nemo_gym.launch.colocation)."""

from tests.helpers import running_deployment, write_config
from tests.launch_projects import counter_instance, get_status, run_gym


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
