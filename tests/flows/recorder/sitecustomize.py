"""What a stage really reads and writes, recorded inside its process (tests/flows/test_dag_contract.py).

Python imports ``sitecustomize`` at start-up from ``PYTHONPATH``; ``tests/flows/conftest.py`` puts this folder
there and sets ``LEAD_RECORD_DIR`` for the workspace's first ``dvc repro``. A stage's main process
(``python -m lead.stages.<stage>``) then records, and writes ``<LEAD_RECORD_DIR>/<module>.json`` when it exits:

* ``params`` — the params keys the stage read: each value read through a ``lead.config`` section
  (``params.train.max_steps`` → ``train.max_steps``; reaching ``params.train`` on the way is not a read), and
  every field of a section it dumped whole (``model_dump``). Reads while ``load_params`` validates the file, or
  while an assignment is validated, are not counted (validation reads everything; what matters is what the
  stage then uses); a mapping-valued key (``ablation.variants``) is recorded per entry read;
* ``modules`` — the workspace's Python files imported (``lead/...``);
* ``read`` / ``written`` — workspace files opened read-only, and files written, created, moved in or deleted,
  seen by Linux inotify on every folder of the workspace (so reads by native code, such as pyarrow's or
  safetensors', count too), until the process exits.

Test tooling only: nothing in ``lead/`` knows about it.
"""

from __future__ import annotations

import atexit
import ctypes
import importlib.abc
import itertools
import json
import os
import struct
import sys
import threading
from pathlib import Path

_DIR = os.environ.get("LEAD_RECORD_DIR")
_SKIP_DIRS = {".git", ".dvc", "__pycache__", "mlruns", ".venv", ".pytest_cache", ".ruff_cache", ".hypothesis"}

# inotify(7)
IN_CLOSE_WRITE, IN_CLOSE_NOWRITE, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x8, 0x10, 0x80, 0x100, 0x200
IN_ISDIR, IN_Q_OVERFLOW = 0x40000000, 0x4000
MASK = IN_CLOSE_WRITE | IN_CLOSE_NOWRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE
SENTINEL = ".lead-record-done"


class _Files(threading.Thread):
    """A thread reading inotify events for every folder under ``root`` until :meth:`stop`."""

    def __init__(self, root: Path) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.libc = ctypes.CDLL("libc.so.6", use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.watches: dict[int, Path] = {}
        self.read: set[str] = set()
        self.written: set[str] = set()
        self.overflow = False
        self.control = root / ".dvc" / "tmp"
        self.control.mkdir(parents=True, exist_ok=True)
        self._watch(self.control, recursive=False)
        self._watch(root)

    def _watch(self, folder: Path, recursive: bool = True, new: bool = False) -> None:
        """Watch ``folder`` (and its sub-folders); ``new``: it was just created, so what is already in it was
        written before its watch existed (inotify's race: a writer faster than this thread) and counts."""
        if folder.name in _SKIP_DIRS and folder != self.control:
            return
        wd = self.libc.inotify_add_watch(self.fd, str(folder).encode(), MASK)
        if wd >= 0:
            self.watches[wd] = folder
        if recursive:
            try:
                entries = [p for p in folder.iterdir() if not p.is_symlink()]
            except OSError:
                return
            for entry in entries:
                if entry.is_dir():
                    self._watch(entry, new=new)
                elif new:
                    self.written.add(entry.relative_to(self.root).as_posix())

    def run(self) -> None:
        buffer = b""
        while True:
            buffer += os.read(self.fd, 1 << 16)
            while len(buffer) >= 16:
                wd, mask, _cookie, size = struct.unpack("iIII", buffer[:16])
                if len(buffer) < 16 + size:
                    break
                name = buffer[16 : 16 + size].rstrip(b"\0").decode(errors="replace")
                buffer = buffer[16 + size :]
                if mask & IN_Q_OVERFLOW:
                    self.overflow = True
                folder = self.watches.get(wd)
                if folder is None or not name:
                    continue
                path = folder / name
                if folder == self.control:
                    if name == SENTINEL:
                        return
                    continue
                if mask & IN_ISDIR:
                    if mask & (IN_CREATE | IN_MOVED_TO):
                        self._watch(path, new=True)
                    continue
                relative = path.relative_to(self.root).as_posix()
                if mask & IN_CLOSE_NOWRITE:
                    self.read.add(relative)
                else:
                    self.written.add(relative)

    def stop(self) -> None:
        (self.control / SENTINEL).write_text("")
        self.join(timeout=30)
        (self.control / SENTINEL).unlink(missing_ok=True)


class _Params:
    """Records the params keys read through ``lead.config``'s sections once ``load_params`` has returned."""

    def __init__(self) -> None:
        self.keys: set[str] = set()
        self.on = False

    def install(self, config) -> None:
        from typing import get_args

        section = config.Section
        paths: dict[type, str] = {}

        def walk(model, prefix: str) -> None:
            paths[model] = prefix
            for name, field in model.model_fields.items():
                for kind in (field.annotation, *get_args(field.annotation)):
                    if isinstance(kind, type) and issubclass(kind, section):
                        walk(kind, f"{prefix}{field.alias or name}.")

        walk(config.Params, "")
        recorder = self

        def getattribute(obj, name):
            value = object.__getattribute__(obj, name)
            # A section reached on the way to its keys (params.train) is not itself a read.
            if recorder.on and not isinstance(value, section):
                fields = type(obj).model_fields
                if name in fields:
                    key = paths.get(type(obj), "?.") + (fields[name].alias or name)
                    if type(value) is dict:  # a mapping of entries (ablation.variants): what is read of it
                        return _Entries(value, key, recorder.keys)
                    recorder.keys.add(key)
            return value

        dump = section.model_dump

        def model_dump(obj, *args, **kwargs):
            if recorder.on:
                exclude = kwargs.get("exclude") or ()
                for name, field in type(obj).model_fields.items():
                    if name not in exclude:
                        recorder.keys.add(paths.get(type(obj), "?.") + (field.alias or name))
            return dump(obj, *args, **kwargs)

        setattr_ = section.__setattr__

        def setattribute(obj, name, value):
            # An assignment is validated (validate_assignment), model validators included: like load_params'
            # validation, what they read to check the whole params is not what the stage uses.
            on, recorder.on = recorder.on, False
            try:
                setattr_(obj, name, value)
            finally:
                recorder.on = on

        section.__getattribute__ = getattribute
        section.__setattr__ = setattribute
        section.model_dump = model_dump
        load = config.load_params

        def load_params(*args, **kwargs):
            recorder.on = False
            try:
                return load(*args, **kwargs)
            finally:
                recorder.on = True

        config.load_params = load_params


class _Entries(dict):
    """A mapping-valued key's value as a stage sees it: looking up one entry (``variants["grpo"]``, ``in``,
    ``get``) reads ``<key>.<entry>``; anything that sees every entry (iterating, ``len``, ``items``, a copy)
    reads ``<key>`` itself. So a cell that reads only its own variant (``ablation.variants.<variant>``) is told
    apart from one that depends on every variant."""

    def __init__(self, data: dict, key: str, keys: set[str]) -> None:
        super().__init__(data)
        self._key, self._keys = key, keys

    def _entry(self, name) -> None:
        self._keys.add(f"{self._key}.{name}")

    def _whole(self) -> None:
        self._keys.add(self._key)

    def __getitem__(self, name):
        self._entry(name)
        return super().__getitem__(name)

    def get(self, name, default=None):
        self._entry(name)
        return super().get(name, default)

    def __contains__(self, name) -> bool:
        self._entry(name)
        return super().__contains__(name)

    def __iter__(self):
        self._whole()
        return super().__iter__()

    def __len__(self) -> int:
        self._whole()
        return super().__len__()

    def __eq__(self, other) -> bool:
        self._whole()
        return super().__eq__(other)

    __hash__ = None

    def keys(self):
        self._whole()
        return super().keys()

    def values(self):
        self._whole()
        return super().values()

    def items(self):
        self._whole()
        return super().items()

    def copy(self):
        self._whole()
        return dict(super().items())


class _PatchConfig(importlib.abc.MetaPathFinder):
    """Patches ``lead.config`` as soon as it is imported (before any stage module binds ``load_params``)."""

    def __init__(self, params: _Params) -> None:
        self.params = params

    def find_spec(self, fullname, path, target=None):
        if fullname != "lead.config":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        loader = spec.loader
        execute = loader.exec_module

        def exec_module(module):
            execute(module)
            self.params.install(module)

        loader.exec_module = exec_module
        return spec


def _stage_module() -> str | None:
    """``lead.stages.<stage>`` when this process is ``python -m lead.stages.<stage>``, else None (DVC itself,
    or a worker a stage spawned: the stage's inotify sees the files of its children)."""
    argv = getattr(sys, "orig_argv", [])
    for flag, value in itertools.pairwise(argv):
        if flag == "-m" and value.startswith("lead.stages."):
            return value
    return None


def _install(name: str) -> None:
    root = Path.cwd().resolve()
    import importlib.util  # noqa: F401  (used by _PatchConfig)

    params = _Params()
    sys.meta_path.insert(0, _PatchConfig(params))
    files = _Files(root)
    files.start()

    def write() -> None:
        files.stop()
        modules = sorted(
            {
                Path(m.__file__).resolve().relative_to(root).as_posix()
                for m in list(sys.modules.values())
                if getattr(m, "__file__", None) and Path(m.__file__).resolve().is_relative_to(root)
            }
        )
        record = {
            "stage": name,
            "params": sorted(params.keys),
            "modules": modules,
            "read": sorted(files.read),
            "written": sorted(files.written),
            "overflow": files.overflow,
        }
        out = Path(_DIR) / f"{name}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(record, indent=1))

    atexit.register(write)


if _DIR and _stage_module():
    _install(_stage_module())
