"""Target configuration: rvtune.toml / pyproject.toml tables -> TargetConfig, and errors that name the place."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from pytest_rvtune.targets.config import X60_PERF_EVENTS, ConfigError, load_targets
from pytest_rvtune.targets.factory import make_target
from pytest_rvtune.targets.local import builtin_targets
from pytest_rvtune.targets.remote_cmd import parse_perf_script, read_status, split_perf

REPO = Path(__file__).resolve().parent.parent.parent


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_builtins_are_always_there(tmp_path: Path):
    targets = load_targets(tmp_path)
    assert set(builtin_targets()) <= set(targets)
    assert targets["qemu"].kind == "builtin" and targets["qemu"].timing_source == "emulated"
    assert targets["host"].isa == "host"


def test_rvtune_toml_board_with_every_key(tmp_path: Path):
    write(tmp_path / "rvtune.toml", """
[targets.laptop]
host = "k1"
port = 2222
user = "rv"
key = "keys/id_ed25519"
agent = false
known_hosts = "~/kh"
ssh_config = "/etc/ssh/ssh_config"
work_dir = "~/rvtune"
isa = "rv64gcv_zvl256b"
vlen = 256
runner = "perf"
perf_events = ["cycles:u"]
record_events = ["l2_miss"]
env = { OMP_NUM_THREADS = "8" }
timeout = 120
taskset = "0-3"
exec_prefix = []
lock_timeout = 30
connect_timeout = 5
keepalive = 10
lock_file = "/run/lock/rvtune.lock"
default_case = "bench"
""")
    cfg = load_targets(tmp_path)["laptop"]
    assert cfg.kind == "ssh" and cfg.hosts == ("k1",) and cfg.port == 2222 and cfg.user == "rv"
    assert cfg.key == tmp_path / "keys/id_ed25519"  # relative to the config file
    assert cfg.known_hosts == Path.home() / "kh"
    assert cfg.env == {"OMP_NUM_THREADS": "8"} and cfg.taskset == "0-3" and cfg.timeout == 120.0
    assert cfg.perf_events == ("cycles:u",) and cfg.record_events == ("l2_miss",)
    assert cfg.timing_source == "real" and cfg.default_case == "bench"


def test_defaults_are_a_checked_perf_board(tmp_path: Path):
    write(tmp_path / "rvtune.toml", '[targets.b]\nhost = "b"\n')
    cfg = load_targets(tmp_path)["b"]
    assert cfg.runner == "perf" and cfg.perf_events == X60_PERF_EVENTS
    assert not cfg.insecure_skip_host_key_check and cfg.known_hosts is None  # ~/.ssh/known_hosts
    assert cfg.vlen == 256 and cfg.port is None and cfg.user is None  # ~/.ssh/config decides


def test_pyproject_pool_and_rvtune_toml_together(tmp_path: Path):
    write(tmp_path / "pyproject.toml", '[tool.rvtune.targets.pool]\nhosts = ["a", "b"]\nexec_prefix = ["qemu"]\n')
    write(tmp_path / "rvtune.toml", '[targets.laptop]\nhost = "k1"\n')
    targets = load_targets(tmp_path)
    assert targets["pool"].hosts == ("a", "b") and targets["pool"].timing_source == "emulated"
    assert targets["laptop"].hosts == ("k1",)


def test_config_file_option_reads_only_that_file(tmp_path: Path):
    write(tmp_path / "rvtune.toml", '[targets.ignored]\nhost = "x"\n')
    other = write(tmp_path / "lab.toml", '[targets.lab]\nhost = "y"\n')
    targets = load_targets(tmp_path, other)
    assert "lab" in targets and "ignored" not in targets
    with pytest.raises(ConfigError, match=r"nope\.toml: config file not found"):
        load_targets(tmp_path, tmp_path / "nope.toml")


@pytest.mark.parametrize(("body", "message"), [
    ('host = "a"\nprot = 22', r"\[targets\.b\]: unknown key 'prot' \(known keys: .*port"),
    ('host = "a"\nport = "22"', r"\[targets\.b\] port: expected a TCP port"),
    ('host = "a"\nport = 70000', r"\[targets\.b\] port: expected a TCP port"),
    ('host = "a"\nvlen = 100', r"\[targets\.b\] vlen: expected a power of two"),
    ('host = "a"\nisa = "rv64gc"', r"\[targets\.b\] isa: boards must be 'rv64gcv_zvl256b'"),
    ('host = "a"\nrunner = "perf record"', r"\[targets\.b\] runner: expected \"perf\""),
    ('host = "a"\ntimeout = 0', r"\[targets\.b\] timeout: expected a positive number"),
    ('host = "a"\ntaskset = "0-3; reboot"', r"\[targets\.b\] taskset: expected a CPU list"),
    ('host = "a"\nenv = { "A B" = "x" }', r"\[targets\.b\] env: 'A B' = 'x'"),
    ('host = "a"\nexec_prefix = "qemu"', r"\[targets\.b\] exec_prefix: expected a list of non-empty strings"),
    ('host = "a"\ninsecure_skip_host_key_check = "yes"',
     r"\[targets\.b\] insecure_skip_host_key_check: expected true or false"),
    ('port = 22', r"\[targets\.b\]: missing host"),
    ('host = "a"\nhosts = ["b"]', r"\[targets\.b\]: set either host"),
    ('hosts = []', r"\[targets\.b\] hosts: a pool needs at least one host"),
    ('host = "a"\nrunner = "plain"\nperf_events = ["x"]',
     r"\[targets\.b\] perf_events: only used with runner = \"perf\""),
])
def test_bad_values_name_file_target_and_key(tmp_path: Path, body: str, message: str):
    path = write(tmp_path / "rvtune.toml", f"[targets.b]\n{body}\n")
    with pytest.raises(ConfigError, match=rf"^{tmp_path}/rvtune\.toml {message}"):
        load_targets(tmp_path)
    assert path.exists()


def test_file_level_errors(tmp_path: Path):
    write(tmp_path / "rvtune.toml", "[targets.qemu]\nhost = 'a'\n")
    with pytest.raises(ConfigError, match=r"rvtune\.toml \[targets\.qemu\]: 'qemu' is a built-in target"):
        load_targets(tmp_path)
    write(tmp_path / "rvtune.toml", "[targets\nhost = 1\n")
    with pytest.raises(ConfigError, match=r"rvtune\.toml: not valid TOML"):
        load_targets(tmp_path)
    write(tmp_path / "rvtune.toml", "[targets.a]\nhost = 'a'\n")
    write(tmp_path / "pyproject.toml", "[tool.rvtune.targets.a]\nhost = 'b'\n")
    with pytest.raises(ConfigError, match=r"rvtune\.toml \[targets\.a\]: already defined in .*pyproject\.toml"):
        load_targets(tmp_path)


def test_an_unknown_table_is_named_with_the_table_meant(tmp_path: Path):
    """Issue 15: `[target.board]` (for `[targets.board]`) defined nothing, and the board was only an "unknown
    target" later, with no word about the file."""
    write(tmp_path / "rvtune.toml", '[target.board]\nhost = "k1"\n\n[triton_rvv]\nkernels_dir = "."\n')
    with pytest.raises(ConfigError) as typo:
        load_targets(tmp_path)
    assert str(typo.value) == (f"{tmp_path}/rvtune.toml: unknown table [target] (known tables: [targets], "
                               "[triton_rvv]); did you mean [targets.board]?")
    write(tmp_path / "rvtune.toml", 'timeout = 5\n[targets.board]\nhost = "k1"\n')
    with pytest.raises(ConfigError, match=r"rvtune\.toml: unknown key timeout \(known tables: \[targets\]"):
        load_targets(tmp_path)
    write(tmp_path / "rvtune.toml", '[targets.board]\nhost = "k1"\n\n[triton_rvv]\nkernels_dir = "."\n')
    assert load_targets(tmp_path)["board"].hosts == ("k1",)  # [triton_rvv] is compat/project.py's table
    (tmp_path / "rvtune.toml").unlink()
    write(tmp_path / "pyproject.toml", '[tool.rvtune.target.board]\nhost = "k1"\n[tool.ruff]\nline-length = 1\n')
    with pytest.raises(ConfigError, match=r"pyproject\.toml: unknown table \[tool\.rvtune\.target\] \(known "
                                          r"tables: \[tool\.rvtune\.targets\]\); did you mean "
                                          r"\[tool\.rvtune\.targets\.board\]\?"):
        load_targets(tmp_path)


def test_make_target_builds_builtins(tmp_path: Path):
    t = make_target(load_targets(tmp_path)["host"], worker_id="master")
    assert t.name == "host"


@pytest.mark.parametrize("with_timing_model", [False, True])
def test_every_builtin_opens_with_the_timing_model_asked_for(tmp_path: Path, with_timing_model: bool):
    """Built-ins open through one opener (no target named in the factory): QEMU records the timing model when
    asked, the host (real time) opens the same either way; each config's ISA is its target class's."""
    configs = load_targets(tmp_path)
    for name, factory in builtin_targets().items():
        target = make_target(configs[name], worker_id="master", with_timing_model=with_timing_model)
        assert target.name == name and configs[name].isa == factory.isa == target.isa
        assert getattr(target, "with_timing_model", False) == (with_timing_model and target.timing_source == "emulated")


def test_readme_example_config_is_valid(tmp_path: Path):
    example = REPO / "rvtune.example.toml"
    targets = load_targets(tmp_path, example)
    boards = {name: cfg for name, cfg in targets.items() if cfg.kind == "ssh"}
    assert {"laptop", "k1-pool"} <= set(boards)
    farm = targets["k1farm"]
    assert farm.kind == "labgrid" and farm.tags == {"board": "k1"} and farm.hosts == ()
    assert tomllib.loads(example.read_text())  # plain TOML, no templating


def test_remote_status_reading():
    assert read_status(0, None, 10, 1).returncode == 0
    assert read_status(124, None, 10, 10.1).timed_out
    assert read_status(137, None, 10, 12).timed_out  # timeout had to KILL
    oom = read_status(137, None, 10, 1)  # a KILL before the deadline is not our timeout
    assert not oom.timed_out and oom.signal == 9
    assert read_status(139, None, 10, 1).signal == 11 and read_status(139, None, 10, 1).returncode == -11
    assert read_status(None, "SEGV", 10, 1).signal == 11
    assert split_perf("elf says hi\n\n@@RVTUNE-PERF-STAT@@\n1,,task-clock,1,100,,\n") == (
        "elf says hi\n", "1,,task-clock,1,100,,\n", "")
    assert split_perf("x\n\n@@RVTUNE-PERF-STAT@@\ncsv\n\n@@RVTUNE-PERF-RECORD@@\nsamples\n") == (
        "x\n", "csv\n", "samples\n")
    assert split_perf("no perf here") == ("no perf here", "", "")


def test_perf_script_samples_sum_per_event_and_symbol():
    text = (" 100 l2_access:u:  3fd0a1 matmul_kernel\n"
            " 300 l2_access:u:  3fd0b2 memcpy\n"
            "  50 l2_miss:u:  3fd0a1 matmul_kernel\n"
            "  70 l2_store_access:u:  3fd0c3 main\n"
            "not a sample line\n")
    assert parse_perf_script(text) == {"l2_access:u (perf record)": 400.0, "l2_miss:u (perf record)": 50.0,
                                       "l2_store_access:u (perf record)": 70.0}
    in_kernel = parse_perf_script(text, "matmul_kernel")
    assert in_kernel == {"l2_access:u (perf record)": 100.0, "l2_miss:u (perf record)": 50.0,
                         "l2_store_access:u (perf record)": 0.0}  # sampled, none in the kernel: a real 0
    assert "l2_load_access:u (perf record)" not in in_kernel  # never sampled: missing, not zero
    # the runtime's GEMM panels the kernel calls are its own work
    panels = text + " 25 l2_miss:u:  3fe000 rv_dot_panel_m8\n"
    assert parse_perf_script(panels, "matmul_kernel", helpers="rv_dot_panel_")["l2_miss:u (perf record)"] == 75.0
    assert parse_perf_script(panels, "matmul_kernel")["l2_miss:u (perf record)"] == 50.0


def test_isa_letters_and_worker_index():
    from pytest_rvtune.targets.ssh import _required_letters, worker_index

    need = _required_letters("rv64gcv_zvl256b")
    assert need == set("imafdcv")
    assert need <= _required_letters("rv64imafdcv_zicbom_zicboz_zicntr_zicond_zicsr_zifencei_zihintpause")
    assert need - _required_letters("rv64imafdc_zicsr_zifencei") == {"v"}  # a K1 without V: refused
    assert [worker_index(w) for w in ("master", "gw0", "gw7")] == [0, 0, 7]
