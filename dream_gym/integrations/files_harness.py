"""The harness that runs a task's evaluator in dream_gym's sandbox (:mod:`.files_task`).

:data:`HARNESS` is the text of the small program :class:`~.files_task.FilesTask` writes into each
evaluation's workspace and runs there, confined: it reads the request (``_request.json``), links
the ``--read`` folders below the sandbox's home, names any process the evaluation tries to start,
seeds ``random`` and ``numpy.random``, calls the evaluation function on ``program.py`` (or runs the
evaluation script on it) and writes what it returned as JSON data to ``_result.json``, which the
parent then reads as untrusted data. It is a text, not a module: it runs only in the sandbox.
"""

from __future__ import annotations

HARNESS = r'''"""dream_gym's harness for a task given as files (written by dream_gym): runs the task's evaluator
on program.py in the sandbox and writes what it returned to _result.json."""
import json, os, sys, traceback

REQUEST, RESULT, PROGRAM = "_request.json", "_result.json", "program.py"
TEXT, ITEMS, DEPTH = 100000, 1000, 16
_PROCESS_EVENTS = frozenset(("os.fork", "os.forkpty", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
                             "subprocess.Popen", "pty.spawn"))
_refused = []
_stage = ["setup"]


def _no_process(event, args):
    # the kernel refuses new processes anyway; this names what the evaluation tried to start
    if event in _PROCESS_EVENTS:
        shown = args[1] if event == "subprocess.Popen" and len(args) > 1 else (args[0] if args else "")
        what = ("%s %r" % (event, shown))[:300]
        _refused.append(what)
        raise PermissionError("%s: the evaluation runs in dream_gym's sandbox, which allows threads but no "
                              "new process" % what)


def _link_home(links):
    home = os.environ.get("HOME") or os.getcwd()
    for relative, target in links:
        place = os.path.join(home, relative)
        os.makedirs(os.path.dirname(place) or home, exist_ok=True)
        if not os.path.lexists(place):
            os.symlink(target, place)


def _seed(seed):
    import random
    random.seed(seed)
    try:
        import numpy
    except ImportError:
        return
    numpy.random.seed(seed)


def _plain(value, depth=0):
    """What the evaluator returned, as JSON data (numpy numbers as numbers, bytes as text)."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return value[:TEXT]
    if isinstance(value, (bytes, bytearray)):
        return bytes(value[:TEXT]).decode("utf-8", "replace")
    if depth >= DEPTH:
        return repr(value)[:1000]
    if isinstance(value, dict):
        return {str(key)[:200]: _plain(item, depth + 1) for key, item in list(value.items())[:ITEMS]}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(item, depth + 1) for item in list(value)[:ITEMS]]
    size = getattr(value, "size", None)
    for name in ("item", "tolist"):
        convert = getattr(value, name, None)
        if callable(convert) and (name == "item" and size == 1 or name == "tolist" and (size or 0) <= ITEMS):
            try:
                return _plain(convert(), depth + 1)
            except Exception:
                pass
    return repr(value)[:1000]


def _threadpoolctl_without_proc():
    # threadpoolctl (numpy's and scikit-learn's thread-pool limits) lists the loaded libraries by
    # reading /proc/self/maps on Linux; the sandbox lets no program read /proc, so it is told to
    # list them with dl_iterate_phdr instead, as it does on other Unix systems
    try:
        import threadpoolctl
    except ImportError:
        return
    if hasattr(threadpoolctl, "_HAS_PROCFS"):
        threadpoolctl._HAS_PROCFS = False


def _evaluator(request):
    import importlib.util
    spec = importlib.util.spec_from_file_location("evaluation_module", request["evaluator"])
    module = importlib.util.module_from_spec(spec)
    sys.modules["evaluation_module"] = module
    spec.loader.exec_module(module)
    return module


def _function(request):
    sys.argv = [request["evaluator"]]
    _stage[0] = "import"
    _seed(request["seed"])
    module = _evaluator(request)
    _stage[0] = "lookup"  # imported: a missing function is said as it is, not as an import's failure
    function = getattr(module, request["function"], None)
    if not callable(function):
        raise AttributeError("the evaluator defines no function %s()" % request["function"])
    _stage[0] = "call"
    _seed(request["seed"])
    result = function(os.path.abspath(PROGRAM), **request["kwargs"])
    metrics = getattr(result, "metrics", result)
    artifacts = getattr(result, "artifacts", None) or {}
    if not isinstance(metrics, dict):
        raise TypeError("%s() returned %s, not a dict of metrics or an EvaluationResult"
                        % (request["function"], type(result).__name__))
    if not isinstance(artifacts, dict):
        artifacts = {"artifacts": artifacts}
    return {"metrics": _plain(metrics), "artifacts": {str(k)[:200]: _text(v) for k, v in list(artifacts.items())[:ITEMS]}}


def _text(value):
    """An artifact as text (OpenEvolve's artifacts are text or bytes)."""
    return _plain(value) if isinstance(value, (str, bytes, bytearray)) else str(value)[:TEXT]


def _read_json(path):
    """A file the evaluation script wrote, read as data: a regular file of at most 256 KB."""
    import stat
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise FileNotFoundError("the evaluation script wrote no %s" % os.path.basename(path)) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > 256 * 1024:
            raise ValueError("%s is not a regular file of at most 256 KB" % os.path.basename(path))
        return json.loads(os.read(fd, 256 * 1024 + 1))
    finally:
        os.close(fd)


def _script(request):
    import runpy
    results = os.path.abspath("results")
    sys.argv = [request["evaluator"], "--program_path", os.path.abspath(PROGRAM), "--results_dir", results]
    _stage[0] = "call"
    _seed(request["seed"])
    try:
        runpy.run_path(request["evaluator"], run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise RuntimeError("the evaluation script exited with status %r" % (exc.code,)) from None
    return {"correct": _plain(_read_json(os.path.join(results, "correct.json"))),
            "metrics": _plain(_read_json(os.path.join(results, "metrics.json")))}


def _write(payload):
    text = json.dumps(payload)
    with open(RESULT + ".tmp", "w") as handle:
        handle.write(text)
    os.replace(RESULT + ".tmp", RESULT)


def main():
    with open(REQUEST) as handle:
        request = json.load(handle)
    _link_home(request["home_links"])
    sys.addaudithook(_no_process)
    _threadpoolctl_without_proc()
    sys.path.insert(0, os.path.dirname(request["evaluator"]))
    try:
        payload = dict(ok=True, **(_script if request["contract"] == "script" else _function)(request))
    except BaseException as exc:
        tail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-4:])
        payload = {"ok": False, "stage": _stage[0], "type": type(exc).__name__, "message": str(exc)[:2000],
                   "traceback": tail[-4000:]}
    payload["refused"] = _refused[:20]
    _write(payload)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # threads the evaluation left running (a timed-out call) do not hold the sandbox


main()
'''


__all__ = ["HARNESS"]
