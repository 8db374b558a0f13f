"""The structure the code promises (docs/architecture.md, issue 21), checked on the source itself.

* no import cycles between zkconsumer's modules, counting every import: top-level, inside functions (a module's
  ``__getattr__`` too), under ``TYPE_CHECKING`` and by name through ``importlib`` (a cycle hidden in a function is
  still two modules that need each other);
* no two packages (first-level folders) import each other, through whichever modules;
* no library module imports the CLI (``zkconsumer/cli`` is the top layer; only ``__main__`` starts it);
* one error model: every exception class zkconsumer defines derives from :class:`ZkConsumerError` and is named
  in the index of ``errors.py``; the library raises no builtin exception but Python's protocol ones;
* one table of Kafka error codes (:class:`KafkaCode`): no module defines its own ``NONE = 0``;
* the layers of docs/architecture.md: a module imports only its own layer or those below it;
* imports inside functions only of the heavy optional dependencies (Spark, Arrow, Docker, matplotlib);
* at most a dozen modules flat in ``zkconsumer/``, no class longer than 500 lines.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import pkgutil
import subprocess
import sys
from collections import defaultdict
from collections.abc import Collection, Iterator
from pathlib import Path

import zkconsumer
from zkconsumer import errors, runtime
from zkconsumer.errors import KafkaCode, ZkConsumerError

ROOT = Path(zkconsumer.__file__).parent
#: The public facade (it imports every layer, lazily) and the entry point: outside the layers.
OUTSIDE_THE_LAYERS = ("zkconsumer", "zkconsumer.__main__")


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def imports_of(mod: str, source: str, is_package: bool, mods: Collection[str]) -> set[str]:
    """The zkconsumer modules one module imports (a package only where a name of its ``__init__`` is imported).

    Every import statement counts, wherever it is: top level, in a function (a module-level ``__getattr__`` too),
    under ``TYPE_CHECKING``. So do imports by name: in a module that calls ``importlib.import_module`` (or
    ``__import__``), every string naming a zkconsumer module, alone or as ``"module:attribute"``, is an import,
    which covers ``import_module("zkconsumer.x")`` and the tables lazy loaders read (``_EXPORTS``, the CLI's
    ``COMMAND_MODULES``)."""
    package = mod if is_package else mod.rpartition(".")[0]
    tree = ast.parse(source)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in mods}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in mods else target)
    if any(isinstance(n, ast.Attribute) and n.attr == "import_module"
           or isinstance(n, ast.Name) and n.id in ("import_module", "__import__") for n in ast.walk(tree)):
        found |= {n.value.partition(":")[0] for n in ast.walk(tree)  # dotted: "zkconsumer" alone is the prog name
                  if isinstance(n, ast.Constant) and isinstance(n.value, str) and "." in n.value}
    return {target for target in found if target in mods and target != mod}


def import_graph() -> dict[str, set[str]]:
    """Module → the zkconsumer modules it imports (:func:`imports_of`)."""
    mods = _modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for mod, path in mods.items():
        graph[mod] |= imports_of(mod, path.read_text(), path.name == "__init__.py", mods)
    return graph


def package_of(module: str) -> str:
    """The first-level folder a module is in (``zkconsumer.zk.layout`` → ``zkconsumer.zk``); a flat
    module is its own."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Package → the packages it imports: every import of a module in one of a module in another. The public
    facade (``zkconsumer/__init__.py``) and ``__main__`` stand outside, as in the layers."""
    packages: dict[str, set[str]] = defaultdict(set)
    for mod, targets in graph.items():
        if mod in OUTSIDE_THE_LAYERS:
            continue
        packages[package_of(mod)] |= {package_of(t) for t in targets if t not in OUTSIDE_THE_LAYERS} - {
            package_of(mod)}
    return packages


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in list(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_finder_sees_imports_hidden_in_getattr_and_importlib() -> None:
    mods = {"zkconsumer", "zkconsumer.p", "zkconsumer.p.a", "zkconsumer.q", "zkconsumer.q.b", "zkconsumer.q.c"}
    getattr_hidden = "def __getattr__(name):\n    from zkconsumer.q.b import B\n\n    return B\n"
    assert imports_of("zkconsumer.p", getattr_hidden, True, mods) == {"zkconsumer.q.b"}
    by_name = "import importlib\n\nimportlib.import_module('zkconsumer.q.b')\n"
    assert imports_of("zkconsumer.p.a", by_name, False, mods) == {"zkconsumer.q.b"}
    table = ("import importlib\n\nTABLE = {'B': 'zkconsumer.q.b', 'C': 'zkconsumer.q.c:C', 'K': 'kafka.x:K'}\n\n\n"
             "def load(name):\n    module, _, attr = TABLE[name].partition(':')\n"
             "    return getattr(importlib.import_module(module), attr)\n")
    assert imports_of("zkconsumer.p.a", table, False, mods) == {"zkconsumer.q.b", "zkconsumer.q.c"}
    assert imports_of("zkconsumer.p.a", "TABLE = {'B': 'zkconsumer.q.b'}\n", False, mods) == set()
    hidden_both_ways = {"zkconsumer.p": {"zkconsumer.q.b"}, "zkconsumer.q.c": {"zkconsumer.p.a"}}
    assert cycles(package_graph(hidden_both_ways)) == [["zkconsumer.p", "zkconsumer.q"]]


def test_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


def test_no_two_packages_import_each_other() -> None:
    """No module cycle is not enough: one package's server importing another package whose modules import the
    first one's lower modules back is no module cycle, yet each package needs the other (broker/ and coordinator/
    were so, hidden by a PEP 562 ``__getattr__``). What both need goes a layer down."""
    graph = import_graph()
    tangled = cycles(package_graph(graph))
    crossing = sorted(f"{m} -> {t}" for m, ts in graph.items() for t in ts for cycle in tangled
                      if package_of(m) in cycle and package_of(t) in cycle and package_of(m) != package_of(t))
    assert tangled == [], crossing


def test_no_library_module_imports_the_cli() -> None:
    offenders = {mod: sorted(t for t in targets if t.startswith("zkconsumer.cli"))
                 for mod, targets in import_graph().items()
                 if not mod.startswith("zkconsumer.cli") and mod != "zkconsumer.__main__"}
    assert {mod: t for mod, t in offenders.items() if t} == {}


def defined_classes() -> Iterator[tuple[str, str, type]]:
    """(module, name, class) of every class a zkconsumer module defines."""
    for info in pkgutil.walk_packages(zkconsumer.__path__, "zkconsumer."):
        if info.name.endswith("__main__"):
            continue  # running it is starting the CLI
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and obj.__module__ == info.name:
                yield info.name, name, obj


def test_every_exception_zkconsumer_defines_has_the_one_root() -> None:
    # Exception only: a signal such as cli.Terminated (a KeyboardInterrupt) must not be caught as an error
    strays = [f"{module}.{name}" for module, name, cls in defined_classes()
              if issubclass(cls, Exception) and not name.startswith("_") and not issubclass(cls, ZkConsumerError)]
    assert strays == []


def error_index() -> dict[str, str]:
    """The index in ``errors.py``'s docstring: class name → its module; a ``*`` ends a retriable class's name."""
    block = errors.__doc__.split("Every error class", 1)[1].split("::", 1)[1]
    index: dict[str, str] = {}
    module = ""
    for line in block.splitlines():
        if not line.startswith("    "):
            if index:
                break  # the end of the literal block
            continue
        first, _, rest = line.strip().partition(" ")
        if first.startswith("zkconsumer"):
            module, line = first, rest
        for entry in filter(None, (e.strip() for e in line.split(","))):
            index[entry] = module
    return index


def test_errors_py_indexes_every_error_class_with_its_module() -> None:
    """Findable from one place: each class deriving from ZkConsumerError is in errors.py's index, under its
    module, marked ``*`` when it is retriable; the index names no class that is gone."""
    defined = {name + ("*" if cls.retriable else ""): module for module, name, cls in defined_classes()
               if issubclass(cls, ZkConsumerError)}
    assert error_index() == defined


#: Builtin exceptions the library may raise, and where: each one where a protocol of Python's asks for it. Any
#: other error is a class of zkconsumer's (issue 32, "one error surface"), which may derive from a builtin too
#: for its callers' sake. A bare ``raise``, or ``raise e`` of a caught exception, passes an error on: not checked.
PROTOCOL_RAISES = {
    "AttributeError": "in a __getattr__ (a module's, PEP 562, or a class's): the answer for a missing name",
    "StopIteration": "in an iterator's __next__: the end of the iteration",
    "NotImplementedError": "an abstract method, its body the raise alone (a docstring aside): subclasses define it",
}
BUILTIN_ERRORS = {name for name, obj in vars(builtins).items()
                  if isinstance(obj, type) and issubclass(obj, BaseException)}
Function = ast.FunctionDef | ast.AsyncFunctionDef


def _protocol_raise(name: str, fn: Function | None) -> bool:
    if fn is None or name not in PROTOCOL_RAISES:
        return False
    if name == "AttributeError":
        return fn.name == "__getattr__"
    if name == "StopIteration":
        return fn.name == "__next__"
    body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    return len(body) == 1 and isinstance(body[0], ast.Raise)


def builtin_raises(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, exception) of each ``raise X`` / ``raise X(...)`` of a builtin exception, the protocol ones aside."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, fn: Function | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Raise) and child.exc is not None:
                exc = child.exc.func if isinstance(child.exc, ast.Call) else child.exc
                if isinstance(exc, ast.Name) and exc.id in BUILTIN_ERRORS and not _protocol_raise(exc.id, fn):
                    found.append((child.lineno, exc.id))
            visit(child, child if isinstance(child, Function) else fn)

    visit(tree, None)
    return found


def test_the_builtin_raise_finder_finds_them_and_allows_the_protocols() -> None:
    code = """
def f():
    raise ValueError("x")
def g(e):
    try:
        pass
    except OSError:
        raise
    raise RuntimeError from e
def __getattr__(name):
    raise AttributeError(name)
class It:
    def __next__(self):
        raise StopIteration
    def abstract(self):
        "a docstring"
        raise NotImplementedError
    def half(self):
        if self:
            raise NotImplementedError
        return 1
def k():
    raise StopIteration
"""
    assert builtin_raises(ast.parse(code)) == [(3, "ValueError"), (9, "RuntimeError"), (20, "NotImplementedError"),
                                               (23, "StopIteration")]


def test_the_library_raises_its_own_errors_not_bare_builtins() -> None:
    """``except ZkConsumerError`` catches every error zkconsumer raises: where a builtin such as ValueError said
    what went wrong, a class of ours says it (IllegalArgument, KafkaUnavailable…: errors.py's index)."""
    bare = [f"{path.relative_to(ROOT.parent)}:{line} {name}"
            for path in sorted(ROOT.rglob("*.py")) for line, name in builtin_raises(ast.parse(path.read_text()))]
    assert bare == []


def test_kafka_error_codes_are_defined_once() -> None:
    codes = set(KafkaCode.__members__)
    redefined = []
    for mod, path in _modules().items():
        if mod == "zkconsumer.errors":
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Constant, ast.UnaryOp)):
                redefined += [f"{mod}.{t.id}" for t in node.targets if isinstance(t, ast.Name) and t.id in codes]
    assert redefined == []


#: The modules that call kazoo themselves, and why (docs/architecture.md, "Who talks to ZooKeeper"). Everything else
#: goes through registry.py. A new module talking to ZooKeeper directly fails this test until it is listed here and
#: in that section of docs/architecture.md with its reason.
TALKS_TO_ZOOKEEPER = {
    "zkconsumer/zk/registry.py": "the typed access layer: every node of the 0.8 layout, read and written",
    "zkconsumer/consumer/zookeeper/rebalance.py": "the watches on ids, topics and its own registration",
    "zkconsumer/consumer/zookeeper/group_view.py": "the data watch on a registration it cannot read, until fixed",
    "zkconsumer/consumer/zookeeper/claims.py": "the owner nodes: claims (async creates and multi-ops), releases and "
                                               "the exists-watches guarding them, on the hot path of a rebalance",
    "zkconsumer/consumer/zookeeper/connector.py": "its session's state listener (suspended, lost, reconnected)",
    "zkconsumer/zk/cluster.py": "a broker's own registration and its watches on brokers and topics",
    "zkconsumer/migration/bridge.py": "a bridged member's registration, owner nodes and session listener",
    "zkconsumer/migration/member.py": "the plan's data watch, the member's acknowledgement, its session listener",
    "zkconsumer/migration/lease.py": "the driver lease (an ephemeral node) and the plan's versioned write",
    "zkconsumer/zk/server.py": "the health probe of a server it started",
    "zkconsumer/zk/multiread.py": "ZooKeeper's multiRead, which kazoo lacks, sent through kazoo's own connection",
    "zkconsumer/web/zookeeper_source.py": "the live view's session listener: the page says when ZooKeeper went away",
}
KAZOO_CALLS = {"get", "set", "create", "delete", "exists", "get_children", "get_async", "set_async", "create_async",
               "delete_async", "exists_async", "get_children_async", "ensure_path", "ensure_path_async",
               "transaction", "add_listener", "remove_listener", "sync", "get_acls", "set_acls", "add_auth", "_call"}
KAZOO_RECIPES = {"ChildrenWatch", "DataWatch", "Lock", "Election", "Partitioner"}


def zookeeper_callers() -> set[str]:
    """Modules calling a kazoo client method on something named like a client (``zk``, ``client``), or building a
    kazoo recipe."""
    found = set()
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            fn = node.func
            if isinstance(fn, ast.Attribute) and fn.attr in KAZOO_CALLS:
                owner = fn.value.attr if isinstance(fn.value, ast.Attribute) else getattr(fn.value, "id", "")
                if owner in ("zk", "_zk", "client"):
                    found.add(path.relative_to(ROOT.parent).as_posix())
            elif isinstance(fn, ast.Name) and fn.id in KAZOO_RECIPES:
                found.add(path.relative_to(ROOT.parent).as_posix())
    return found


def test_zookeeper_is_talked_to_only_where_the_docs_say() -> None:
    assert zookeeper_callers() == set(TALKS_TO_ZOOKEEPER)
    page = (ROOT.parent / "docs" / "architecture.md").read_text()
    section = page.split("\n## Who talks to ZooKeeper\n", 1)[1].split("\n## ", 1)[0]
    assert [m for m in TALKS_TO_ZOOKEEPER if m.removeprefix("zkconsumer/") not in section] == []


#: The layers, bottom (0) to top, by module prefix (the longest prefix decides). A module may import its own layer
#: and those below; ``zkconsumer/__init__.py`` (the public API) and ``__main__`` stand outside.
LAYERS = {
    "zkconsumer.errors": 0, "zkconsumer.types": 0, "zkconsumer.records": 0, "zkconsumer.trace": 0,
    "zkconsumer.runtime": 0, "zkconsumer.consoles": 0, "zkconsumer.broker_version": 0, "zkconsumer.kafka_admin": 0,
    "zkconsumer.javacompat": 0,
    "zkconsumer.zk": 1, "zkconsumer.assignment": 1, "zkconsumer.config": 1, "zkconsumer.log": 1, "zkconsumer.wire": 1,
    "zkconsumer.consumer": 2, "zkconsumer.broker": 2, "zkconsumer.coordinator": 2, "zkconsumer.migration": 2,
    "zkconsumer.apache_kafka": 2, "zkconsumer.tools": 2,
    "zkconsumer.scenario": 3,
    "zkconsumer.lab": 4, "zkconsumer.analysis": 4, "zkconsumer.web": 4, "zkconsumer.sim": 4,
    "zkconsumer.results": 4,
    "zkconsumer.cli": 5,
}


def layer_of(module: str) -> int | None:
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len, default=None)
    return LAYERS[best] if best else None


def test_every_module_has_a_layer() -> None:
    assert [m for m in _modules() if m not in OUTSIDE_THE_LAYERS and layer_of(m) is None] == []


def test_imports_go_down_the_layers_only() -> None:
    upward = sorted(f"{mod} ({layer_of(mod)}) -> {target} ({layer_of(target)})"
                    for mod, targets in import_graph().items() if mod not in OUTSIDE_THE_LAYERS
                    for target in targets if target != "zkconsumer" and layer_of(target) > layer_of(mod))
    assert upward == []


def test_one_scenario_two_worlds() -> None:
    """The lab (real processes) and the simulator (simulated ones) both run the scenario package's plans, and
    neither imports the other: whatever both need lives in ``zkconsumer.scenario`` (or below), which starts
    nothing."""
    packages = package_graph(import_graph())
    lab, sim, scenario = "zkconsumer.lab", "zkconsumer.sim", "zkconsumer.scenario"
    assert sim not in packages[lab] and lab not in packages[sim]
    assert scenario in packages[lab] and scenario in packages[sim]
    assert packages[scenario] <= {p for p in LAYERS if LAYERS[p] < LAYERS[scenario]}


def test_the_consumer_drivers_do_not_import_each_other() -> None:
    """consumer/ is the shared surface; zookeeper/ and coordinated/ are two drivers of it, side by side."""
    graph = import_graph()
    zookeeper, coordinated = "zkconsumer.consumer.zookeeper", "zkconsumer.consumer.coordinated"
    crossing = sorted(f"{m} -> {t}" for m, ts in graph.items() for t in ts
                      if (m.startswith(zookeeper) and t.startswith(coordinated))
                      or (m.startswith(coordinated) and t.startswith(zookeeper))
                      or (m.count(".") == 2 and m.startswith("zkconsumer.consumer.")
                          and t.startswith((zookeeper, coordinated))))
    assert crossing == []


#: What may be imported inside a function, and why: starting Spark's JVM, Arrow, the Docker SDK or matplotlib
#: costs seconds or needs a service, and most commands never use them.
LAZY_IMPORTS = {
    "pyspark": "a JVM behind it; only the analysis needs it",
    "pyarrow": "only the analysis's Arrow path",
    "docker": "the Docker SDK: only the docker backend",
    "requests": "the Docker SDK's transport errors",
    "matplotlib": "plots only",
    "confluent_kafka": "optional (dev extra): only the librdkafka member",
    "zkconsumer.analysis": "imports pyspark",
    "zkconsumer.lab.containers": "imports the Docker SDK",
    "zkconsumer.lab.compare": "imports pandas, which the consumer's container image leaves out",
    "zkconsumer.web": "Starlette and uvicorn: only the commands that serve a page (watch, lab --ui) need them",
    "zkconsumer.sim": "greenlet: only `zkconsumer sim` needs it, and the consumer's container image leaves it out",
    "zkconsumer.results": "plotly and the simulator's vocabulary: only `zkconsumer results` needs them, and the "
                          "consumer's container image leaves both out",
}
#: Function-local imports for another reason, each explained where it is.
LAZY_ELSEWHERE = {
    ("zkconsumer.errors", "kafka"): "the bottom layer imports no third party at import time; only names a code",
}


def test_imports_inside_functions_are_only_the_heavy_optional_ones() -> None:
    found = []
    for mod, path in _modules().items():
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and not node.level:
                    names = [node.module or ""]
                elif isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                else:
                    continue
                found += [(mod, n) for n in names if not n.startswith(tuple(LAZY_IMPORTS))
                          and (mod, n) not in LAZY_ELSEWHERE]
    assert sorted(set(found)) == []


def test_at_most_a_dozen_modules_stay_flat() -> None:
    flat = sorted(p.name for p in ROOT.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert len(flat) <= 12, flat


def test_no_class_is_longer_than_500_lines() -> None:
    long = []
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > 500:
                long.append(f"{path.relative_to(ROOT.parent)}:{node.name} {node.end_lineno - node.lineno + 1}")
    assert long == []


#: Functions in lab/ and sim/ longer than ~80 lines, and why they stay; the test fails once one is split.
LONG_FUNCTIONS_LEFT: dict[str, str] = {}


def test_no_function_of_the_two_worlds_is_longer_than_80_lines() -> None:
    """The lab and the simulator carry out whole runs; a function of theirs that does not fit a screen holds state
    that belongs in an object (the herd's did: sim/herd.py's Herd)."""
    long = set()
    for folder in ("lab", "sim"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 80:
                    long.add(f"{path.relative_to(ROOT.parent).as_posix()}:{node.name}")
    assert long == set(LONG_FUNCTIONS_LEFT)


def test_the_cli_and_the_consumer_start_without_the_heavy_dependencies() -> None:
    """``zkconsumer consume`` runs in a container image without Spark, pandas, numpy, Arrow, matplotlib, plotly or
    greenlet (docker/Dockerfile: every command module is loaded to build the parser, so none may import them at
    the top), and every command starts faster without them."""
    heavy = ("pyspark", "pandas", "numpy", "pyarrow", "matplotlib", "docker", "plotly", "greenlet")
    code = ("import sys, zkconsumer, zkconsumer.cli, zkconsumer.cli.consume, zkconsumer.cli.lab; "
            "zkconsumer.cli.build_parser(); "
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({heavy!r})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_public_api_is_what_all_lists_and_every_name_resolves() -> None:
    assert set(zkconsumer.__all__) - {"__version__"} == set(zkconsumer._EXPORTS)
    for name in zkconsumer.__all__:
        assert getattr(zkconsumer, name) is not None, name
    from zkconsumer import ConsumerConfig, ZookeeperConsumerConnector  # the README's example (docs/python-api.md)
    assert ZookeeperConsumerConnector.__module__ == "zkconsumer.consumer.zookeeper.connector"
    assert ConsumerConfig.from_properties({"group.id": "g"}).group_id == "g"


def test_importing_the_package_loads_neither_client_library() -> None:
    """The facade is lazy: the analysis on a Spark worker imports ``zkconsumer.analysis`` without kafka-python."""
    code = "import sys, zkconsumer, zkconsumer.analysis.traces; print('kafka' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


#: Where threads, locks, queues, clocks, sleeps, random draws, random ids, host names and process ids must come from
#: the runtime seam (zkconsumer/runtime.py): the code a consumer member, a migration driver, a bridged member and
#: the broker's request handling run, so that the simulator (docs/simulation.md, "The runtime seam") can put all
#: of them on its scheduler. A module here that imports threading, queue or random, reads time's clocks or sleeps,
#: draws a uuid or asks the host's name or its pid itself would run on real time and real threads in a simulation.
ON_THE_SEAM = ("zkconsumer/consumer/", "zkconsumer/zk/", "zkconsumer/coordinator/", "zkconsumer/migration/",
               "zkconsumer/broker/", "zkconsumer/wire/", "zkconsumer/log/", "zkconsumer/assignment/",
               "zkconsumer/trace.py", "zkconsumer/config/", "zkconsumer/records.py")
#: Modules under those paths that are not on a member's, a driver's or the broker's path, and why.
OFF_THE_SEAM = {
    "zkconsumer/zk/server.py": "starts and watches a real ZooKeeper JVM (the simulator has its own ZooKeeper)",
}
#: Modules on the path not converted yet, and why. The test below fails once one of them no longer needs its place
#: here, so the list cannot go stale.
NOT_ON_THE_SEAM_YET: dict[str, str] = {}
SEAM_MODULES = {"threading", "_thread", "queue", "random"}
SEAM_TIME_CALLS = {"sleep", "monotonic", "monotonic_ns", "time", "time_ns", "perf_counter", "perf_counter_ns"}
#: Calls of these modules that the seam answers, by module (whatever name the module is imported as).
SEAM_CALLS = {"time": SEAM_TIME_CALLS, "uuid": {"uuid1", "uuid4"}, "os": {"getpid", "kill"},
              "socket": {"gethostname", "getfqdn"}}


def seam_bypasses(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) of each way around the runtime seam: importing threading, _thread, queue or random (under any
    name); calling time's clocks and sleep, uuid's random ids, ``os.getpid``/``os.kill`` or the host's name, by
    the module under whatever name it is imported (``import time as t``; ``t.monotonic()``) or imported alone
    (``from time import sleep``)."""
    found: list[tuple[int, str]] = []
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                top = a.name.split(".")[0]
                if top in SEAM_MODULES:
                    found.append((node.lineno, f"import {a.name}"))
                elif top in SEAM_CALLS:
                    aliases[a.asname or top] = top
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module.split(".")[0] in SEAM_MODULES:
                found.append((node.lineno, f"from {node.module} import"))
            elif node.module in SEAM_CALLS:
                found += [(node.lineno, f"from {node.module} import {a.name}") for a in node.names
                          if a.name in SEAM_CALLS[node.module]]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            module = aliases[node.value.id]
            if node.attr in SEAM_CALLS[module]:
                found.append((node.lineno, f"{module}.{node.attr}"))
    return sorted(found)


def seam_bindings(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) of each name of the seam bound once instead of looked up at each use: ``from
    zkconsumer.runtime import monotonic``, or a default argument ``clock=runtime.monotonic``. Either keeps the live
    function when a simulation installs its own."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "zkconsumer.runtime":
            found += [(node.lineno, f"from zkconsumer.runtime import {a.name}") for a in node.names
                      if a.name in runtime.NAMES]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for default in [*node.args.defaults, *node.args.kw_defaults]:
                if (isinstance(default, ast.Attribute) and default.attr in runtime.NAMES
                        and isinstance(default.value, ast.Name) and default.value.id == "runtime"):
                    found.append((default.lineno, f"default argument runtime.{default.attr}"))
    return sorted(found)


def test_the_seam_finders_find_the_ways_around() -> None:
    code = ("import threading\nimport time\nfrom queue import Queue\nfrom time import sleep, strftime\n"
            "t = time.monotonic()\ns = time.strftime('%Y')\nimport random as r\nimport time as clock\n"
            "clock.sleep(1)\nimport uuid as u, os, socket\nu.uuid4(); u.UUID(int=1); os.getpid(); os.path\n"
            "socket.gethostname(); socket.socket()\nfrom uuid import uuid4, UUID\n")
    assert seam_bypasses(ast.parse(code)) == [
        (1, "import threading"), (3, "from queue import"), (4, "from time import sleep"), (5, "time.monotonic"),
        (7, "import random"), (9, "time.sleep"), (11, "os.getpid"), (11, "uuid.uuid4"),
        (12, "socket.gethostname"), (13, "from uuid import uuid4")]
    bound = "from zkconsumer.runtime import Empty, monotonic\n\ndef f(clock=runtime.monotonic, n=runtime.x): pass\n"
    assert seam_bindings(ast.parse(bound)) == [(1, "from zkconsumer.runtime import monotonic"),
                                               (3, "default argument runtime.monotonic")]


def test_the_consumer_takes_threads_time_and_chance_from_the_runtime_seam_only() -> None:
    """zkconsumer/runtime.py is the one source of concurrency, time, randomness, ids and host names of the
    consumer, the migration, the coordinator and the broker (issues 39 and 53: every source of order goes through the
    simulator's scheduler); the modules listed in NOT_ON_THE_SEAM_YET aside."""
    bypassing: dict[str, list[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        name = path.relative_to(ROOT.parent).as_posix()
        if name.startswith(ON_THE_SEAM) and name not in OFF_THE_SEAM:
            found = seam_bypasses(ast.parse(path.read_text()))
            if found:
                bypassing[name] = [f"{line}: {what}" for line, what in found]
    assert {name: found for name, found in bypassing.items() if name not in NOT_ON_THE_SEAM_YET} == {}
    assert sorted(set(NOT_ON_THE_SEAM_YET) - set(bypassing)) == [], "converted: drop it from NOT_ON_THE_SEAM_YET"


def test_no_module_binds_a_name_of_the_runtime_seam_at_import() -> None:
    bound = [f"{path.relative_to(ROOT.parent)}:{line} {what}"
             for path in sorted(ROOT.rglob("*.py")) for line, what in seam_bindings(ast.parse(path.read_text()))]
    assert bound == []
