"""The suite's time limits scale with the machine's load (tests/conftest.py): a busy machine is not a failure.
And the longest files go out to the test workers first."""

import pytest

import tests.conftest as harness


class Item:
    def __init__(self, timeout=None, nodeid="tests/unit/test_example.py::test_it"):
        self.nodeid = nodeid
        self.marks = [pytest.mark.timeout(timeout).mark] if timeout else []

    def get_closest_marker(self, name):
        return next((m for m in self.marks if m.name == name), None)

    def add_marker(self, marker, append=True):
        self.marks.insert(len(self.marks) if append else 0, marker.mark)


class Config:
    def getini(self, name):
        return "900"


@pytest.mark.parametrize(
    ("load", "factor"), [(0.3, 1.0), (2.0, 1.0), (5.0, 2.5), (40.0, harness.MAX_SLOWDOWN)]
)
def test_a_busy_machine_stretches_every_time_limit(monkeypatch, load, factor):
    monkeypatch.setattr(harness.os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(harness.os, "cpu_count", lambda: 2)
    plain, marked = Item(), Item(timeout=2400)
    harness.pytest_collection_modifyitems(Config(), [plain, marked])

    def limit(item):
        return item.get_closest_marker("timeout").args[0] if item.get_closest_marker("timeout") else 900

    assert limit(plain) == 900 * factor and limit(marked) == 2400 * factor


def test_the_longest_files_go_first_and_each_file_keeps_its_order(monkeypatch):
    monkeypatch.setattr(harness.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    names = [
        "tests/unit/test_a.py::one",
        "tests/flows/test_pipeline.py::shares_the_dag_run",
        "tests/unit/test_a.py::two",
        "tests/stack/test_stack.py::first",
        "lead/core/rewards.py::lead.core.rewards.lead_rewards",
        "tests/stack/test_stack.py::second",
    ]
    items = [Item(nodeid=n) for n in names]
    harness.pytest_collection_modifyitems(Config(), items)
    assert [i.nodeid for i in items] == [
        "tests/flows/test_pipeline.py::shares_the_dag_run",  # goes with tests/flows/test_dag.py, the longest
        "tests/stack/test_stack.py::first",
        "tests/stack/test_stack.py::second",
        "tests/unit/test_a.py::one",
        "tests/unit/test_a.py::two",
        "lead/core/rewards.py::lead.core.rewards.lead_rewards",
    ]
