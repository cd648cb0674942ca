"""What one collected item is: the kernel-suite item's loaded module, case, config and target (KernelItemInfo), or
a Triton_RVV project item's entry, case and config (ProjectItemInfo). Collection (collect.py) makes them, the item
pipeline (item.py) and the fixtures read them; they live here so that neither needs the other for its types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: spec.py loads torch
    from pytest_rvtune.compat.project import RvvCase, RvvEntry, RvvProject
    from pytest_rvtune.compat.triton_rvv_module import RvvConfig
    from pytest_rvtune.spec import BlockConfig, KernelSpec


class KernelItemInfo:
    """What one kernel-suite item is: the loaded kernel module, case, config and target name."""

    def __init__(self, spec: KernelSpec, case: str, config: BlockConfig, target: str) -> None:
        self.spec = spec
        self.case = case
        self.config = config
        self.config_values = dict(config.kwargs)
        self.config_id = spec.config_id(config)
        self.target = target

    def item_name(self, suffix: str = "") -> str:
        """The item's pytest name, ``kernel[case-config<suffix>]``: the plugin's items and `rvtune tune`'s records
        must name an item alike (compare and resume match records by node id)."""
        return f"{self.spec.name}[{self.case}-{self.config_id}{suffix}]"


@dataclass
class ProjectItemInfo:
    """What one project item is (the plugin's rvtune_target fixture reads ``target``)."""

    project: RvvProject
    entry: RvvEntry
    case: RvvCase
    config: RvvConfig
    config_id: str
    target: str
