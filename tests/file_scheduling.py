"""How pytest-xdist hands test files to the two test processes of run_scripts/test.sh (``-n 2 --dist loadfile``).

xdist's ``loadfile`` makes each test file one unit of work: its tests run in order in one process, and an idle process
takes the next file. :class:`FileScheduling` is that, except that the files with a test marked
``pytest.mark.xdist_group(name)`` are one unit together: they run one after another in one process, never beside each
other. tests/staleness/conftest.py marks the tests that start a local Ray with verl's TransferQueue that way: two of
them starting at once beside a background run's start-up took over two minutes on two cores.

The order in which the units are handed out: xdist's (the largest first, so that the last to finish are short), except
that the e2e files come after every other file: their tests wait for the background runs (tests/conftest.py), and a
process waiting on one takes no other file meanwhile.
"""

from typing import Optional

from xdist.scheduler import LoadScopeScheduling


def group_of(item) -> Optional[str]:
    """The ``xdist_group`` a test is marked with, read as xdist reads it (``xdist_group("g")``,
    ``xdist_group(name="g")``, or a bare ``xdist_group``: "default"); None when it has none."""
    marker = item.get_closest_marker("xdist_group")
    if marker is None:
        return None
    return str(marker.args[0]) if marker.args else str(marker.kwargs.get("name", "default"))


def file_of(nodeid: str) -> str:
    """The test file of a pytest node id (``tests/a/test_b.py::test_c[1]`` -> ``tests/a/test_b.py``)."""
    return nodeid.split("::", 1)[0]


class FileScheduling(LoadScopeScheduling):
    """``--dist loadfile`` with ``xdist_group`` honoured (module docstring). ``file_groups``: a test file -> its group,
    filled from the workers' collection before xdist schedules (tests/conftest.py's XdistBackground)."""

    def __init__(self, config, log, file_groups: dict[str, str], last_files: set[str]):
        super().__init__(config, log)
        self.file_groups = file_groups
        self.last_files = last_files  # the e2e files (filled like file_groups)
        self._ordered = False

    def _split_scope(self, nodeid: str) -> str:
        file = file_of(nodeid)
        return self.file_groups.get(file, file)

    def _assign_work_unit(self, node) -> None:
        if not self._ordered:  # the first hand-out: xdist's schedule() has queued every unit by then
            self._ordered = True
            last = {self._split_scope(file) for file in self.last_files}
            units = sorted(self.workqueue.items(), key=lambda unit: unit[0] in last)  # stable: xdist's order otherwise
            self.workqueue.clear()
            self.workqueue.update(units)
        super()._assign_work_unit(node)
