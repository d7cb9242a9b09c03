"""dream_gym.infrastructure.isolation: timeouts, memory limits, secrets, output floods, exit codes."""

from __future__ import annotations

import json
import os
import resource
import time

from dream_gym.infrastructure.isolation import (
    LINE_BYTES,
    QUEUED_BYTES,
    TRUNCATION_MARKER,
    run_python,
    scrubbed_env,
    start_python,
)


def test_secrets_do_not_reach_the_child(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-123")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-456")
    out = run_python(code="import os, json; print(json.dumps(dict(os.environ)))", wall_s=10)
    assert out.returncode == 0, out.stderr
    child_env = json.loads(out.stdout)
    assert "OPENAI_API_KEY" not in child_env and "AWS_SECRET_ACCESS_KEY" not in child_env
    assert "sk-secret-123" not in out.stdout and "aws-secret-456" not in out.stdout
    assert child_env["PYTHONHASHSEED"] == "0" and child_env["OPENBLAS_NUM_THREADS"] == "1"
    assert "OPENAI_API_KEY" not in scrubbed_env()


def test_timeout_kills_an_infinite_loop_and_its_threads(tmp_path):
    code = "import threading\nthreading.Thread(target=lambda: [0 for _ in iter(int, 1)]).start()\nwhile True: pass\n"
    started = time.monotonic()
    out = run_python(code=code, wall_s=1.5, cpu_s=30)
    elapsed = time.monotonic() - started
    assert out.timed_out and out.returncode is not None and out.returncode < 0
    assert elapsed < 1.5 + 3.5, elapsed  # killed at the deadline (slack for a loaded machine)
    assert "timeout" in out.describe()


def test_cpu_limit_counts_as_timeout():
    out = run_python(code="while True: pass", wall_s=10, cpu_s=1)
    assert out.timed_out and out.duration_s < 5


def test_memory_bomb_fails_without_hurting_the_parent():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = run_python(code="blocks = []\nwhile True: blocks.append(bytearray(50 << 20))", wall_s=10, memory_mb=300)
    assert out.returncode != 0 and out.memory_exceeded and not out.timed_out
    assert "MemoryError" in out.stderr
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100_000  # KiB: parent untouched


def test_output_flood_is_truncated_with_a_marker():
    out = run_python(code="import sys\nfor _ in range(200000): sys.stdout.write('x' * 99 + '\\n')\nprint('END')",
                     wall_s=20, max_output_bytes=10_000)
    assert out.returncode == 0
    assert out.stdout_truncated and out.stdout_bytes > 19_000_000
    assert len(out.stdout) < 10_000 + 200
    assert TRUNCATION_MARKER.split("{n}")[0] in out.stdout
    assert out.stdout.rstrip().endswith("END")  # the tail is kept: the last lines matter most


def test_exit_code_stdin_args_and_cwd(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text("import os, sys\nprint(sys.argv[1:], sys.stdin.read(), os.getcwd())\nsys.exit(7)\n")
    out = run_python(script, args=["a", "b"], stdin_bytes=b"hello", cwd=tmp_path, wall_s=10)
    assert out.returncode == 7 and not out.timed_out and out.killed_signal is None
    assert out.stdout.strip() == f"['a', 'b'] hello {os.path.realpath(tmp_path)}"
    assert out.describe() == "exit code 7"


def test_run_python_needs_exactly_one_program():
    import pytest

    with pytest.raises(ValueError):
        run_python()
    with pytest.raises(ValueError):
        run_python("x.py", code="print(1)")


def test_interactive_child_line_protocol(tmp_path):
    script = tmp_path / "echo.py"
    script.write_text("import sys\nprint('noise')\nprint('@@READY', flush=True)\n"
                      "for line in sys.stdin:\n    print('@@ECHO ' + line.strip().upper(), flush=True)\n")
    child = start_python(script, wall_s=10)
    assert child.read_line(b"@@READY") == b""
    assert child.send(b"ping\n")
    assert child.read_line(b"@@ECHO ") == b"PING"
    out = child.finish()
    assert out.returncode == 0 and "noise" in out.stdout


def test_lines_no_protocol_reads_queue_a_bounded_number_of_bytes(tmp_path):
    """A red-team candidate printed 10,000 lines of 100 KB: the queue of lines its task's protocol
    never read took the evaluating process from 178 MB to 1.1 GB. The queue holds at most
    QUEUED_BYTES (each line cut to LINE_BYTES), and a protocol line still reads."""
    script = tmp_path / "flood.py"
    script.write_text("import sys\nline = 'x' * 100_000 + '\\n'\nfor _ in range(300):\n    sys.stdout.write(line)\n"
                      "print('@@DONE ok', flush=True)\n")
    unread = start_python(script, wall_s=30, max_output_bytes=1 << 20)
    assert unread.finish().returncode == 0  # a task without a protocol reads no line
    queued = sum(len(line) for line in unread._lines)
    assert 0 < queued <= QUEUED_BYTES + LINE_BYTES and all(len(line) <= LINE_BYTES for line in unread._lines)
    read = start_python(script, wall_s=30, max_output_bytes=1 << 20)
    assert read.read_line(b"@@DONE ", timeout=20) == b"ok"  # a protocol that reads drains the queue as it goes
    assert read.finish().returncode == 0


def test_a_candidate_keeps_no_note_in_extended_attributes(tmp_path):
    """Landlock does not rule extended attributes: a candidate tagged a file it could not write
    (a note for the next candidate). Refused as a file system without them refuses them."""
    anchor = tmp_path / "anchor"
    anchor.write_text("read only to the candidate")
    code = ("import errno, os, sys\n"
            "for call in (lambda: os.setxattr(sys.argv[1], 'user.note', b'1'), lambda: os.listxattr(sys.argv[1])):\n"
            "    try:\n        call()\n        print('DONE')\n"
            "    except OSError as exc:\n        print(errno.errorcode[exc.errno])\n")
    out = run_python(code=code, args=[str(anchor)], wall_s=10, read_dirs=[tmp_path])
    assert out.returncode == 0 and out.stdout.split() == ["ENOTSUP", "ENOTSUP"], out.stdout + out.stderr
    assert os.listxattr(anchor) == []


def test_a_candidate_can_neither_lock_a_file_nor_read_or_push_the_page_cache(tmp_path):
    """Two candidates of one round passed a 32-bit word through file locks on a file both could
    read, and one candidate left 32 bits for the next in which files were cached (fadvise to
    push out, mincore to read back exactly)."""
    shared = tmp_path / "shared"
    shared.write_text("x" * 8192)
    code = ("import errno, fcntl, mmap, os, sys\n"
            "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
            "def attempt(call):\n"
            "    try:\n        call()\n        return 'DONE'\n"
            "    except OSError as exc:\n        return errno.errorcode[exc.errno]\n"
            "print(attempt(lambda: fcntl.flock(fd, fcntl.LOCK_SH)))\n"
            "print(attempt(lambda: fcntl.lockf(fd, fcntl.LOCK_SH)))\n"
            "print(attempt(lambda: os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)))\n"
            "mapped = mmap.mmap(fd, 8192, prot=mmap.PROT_READ)\n"
            "print(attempt(lambda: mapped.madvise(21)))\n")  # MADV_PAGEOUT
    out = run_python(code=code, args=[str(shared)], wall_s=10, read_dirs=[tmp_path])
    assert out.returncode == 0 and out.stdout.split() == ["ENOLCK", "ENOLCK", "EPERM", "EPERM"], out.stdout + out.stderr
