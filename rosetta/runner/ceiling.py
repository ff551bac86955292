"""The machine's measured ceilings: multiply-add throughput per precision and memory bandwidth.

"Of peak" needs a peak the hardware really gives. CPU flags cannot say how many FLOP a cycle
gives (Zen 4 runs AVX-512 on 256-bit units: 32 FLOP/cycle, Zen 5 64, both flag ``avx512f``),
and a matmul probe is a library's rate, which a framework's own kernels can beat. So the run
compiles ``ceiling.c`` (beside this module) with the system C compiler at ``-march=native`` and
runs, on every usable core (one thread each, pinned):

- **compute**: a multiply-add loop with enough independent accumulators to fill the FMA pipes,
  for every kernel the compiler could build here (``fma512``, ``fma256``, the portable
  ``fmavec``; ``dpbf16``: ``VDPBF16PS`` bf16 dot products where the target has ``avx512_bf16``).
  The fp32 ceiling is the best fp32 kernel's rate, the bf16 ceiling the bf16 kernel's (none:
  bf16 is held to the fp32 ceiling). FLOP per cycle is *measured*: each thread's rate over the
  clock it saw, timed by a chain of dependent register adds right after (one add per cycle); on
  a loaded machine both read low together and their ratio stands.
- **memory**: a STREAM triad ``a = b + s*c`` over doubles in C, three arrays each four times
  the last-level caches of the usable cores (64 MiB at least), counted as STREAM counts it (24
  bytes per element; the write-allocate read is not counted).

The compiler, its version, the flags and the source's SHA-256 are recorded. Where no C compiler
exists (or it cannot build the source, or the program fails), the ceiling is the matmul probe the
caller passes (the best GEMM of :mod:`rosetta.runner.peak`), with that stated, and the bandwidth
a one-thread NumPy triad (a lower bound, stated as such).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

SOURCE = Path(__file__).with_name("ceiling.c")
NATIVE_FLAGS = ("-O2", "-march=native", "-ffp-contract=fast", "-pthread", "-std=gnu11")
PORTABLE_FLAGS = ("-O2", "-ffp-contract=fast", "-pthread", "-std=gnu11")  # -march refused
COMPILERS = ("cc", "gcc", "clang")  # after $CC
COMPUTE_SECONDS = 0.2  # per repetition of one kernel on every core
REPS = 5  # best of: the ceiling is the machine's rate, not its noise
RUN_TIMEOUT_S = 120
COMPILE_TIMEOUT_S = 60
#: kernels per precision, in order of preference; the portable one runs only where none other did
FP32_KERNELS = ("fma512", "fma256")
PORTABLE = "fmavec"
BF16_KERNELS = ("dpbf16",)
TRIAD_MIN_MIB = 64
TRIAD_BYTES_PER_ELEMENT = 24  # STREAM's count: read b and c, write a
MATMUL_PROBE = "matmul probe"
FMA_KERNEL = "fma kernel"


class CeilingUnavailable(Exception):
    """The C ceiling cannot be measured here; the message says why (one line)."""


def source_sha256(path: Path = SOURCE) -> str:
    """SHA-256 of the kernel's source (what ran is what the record names)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run_group(cmd: list[str], timeout: float) -> subprocess.CompletedProcess:
    """``cmd`` in a process group of its own, ended whole at ``timeout`` (a compiler that hangs
    leaves no children behind); raises ``subprocess.TimeoutExpired`` then."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.communicate()
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def find_compiler(
    env: dict | None = None, which: Callable[[str], str | None] = shutil.which
) -> tuple[dict | None, str]:
    """The C compiler to use: ``$CC`` if set (its flags kept: ``CC="gcc -m64"`` compiles with
    ``-m64``), else the first of ``cc``, ``gcc``, ``clang`` on PATH, as ``({"path", "version",
    "cc_flags"}, "")``; ``(None, why)`` when there is none, ``$CC`` cannot be parsed, or it
    does not answer ``--version`` within the timeout (then its process group is ended and no
    other compiler is tried in its place: the user named that one)."""
    env = os.environ if env is None else env
    names: list[tuple[str, list[str]]] = []
    cc = env.get("CC", "").strip()
    if cc:
        try:
            words = shlex.split(cc)
        except ValueError as exc:
            return None, f"CC={cc[:60]!r} cannot be parsed ({exc}); fix or unset CC"
        names.append((words[0], words[1:]))
    names.extend((c, []) for c in COMPILERS)
    for name, flags in names:
        path = which(name)
        if not path:
            continue
        try:
            out = _run_group([path, *flags, "--version"], COMPILE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return None, (f"{path} did not answer --version in {COMPILE_TIMEOUT_S:g} s (its "
                          "processes were ended); fix or unset CC")  # fmt: skip
        except OSError:
            continue
        lines = (out.stdout or out.stderr).strip().splitlines()
        version = lines[0] if lines else "unknown"
        return {"path": path, "version": version, "cc_flags": flags}, ""
    tried = ", ".join(dict.fromkeys(n for n, _ in names))
    return None, f"no C compiler found (tried {tried} on PATH; set CC to one)"


def build(compiler: dict, workdir: Path, source: Path = SOURCE) -> tuple[Path, list[str]]:
    """Compile ``source`` into ``workdir``; (the program, the flags used: ``$CC``'s own first).
    Native flags first, the portable ones where the compiler refuses ``-march=native``;
    ``CeilingUnavailable`` naming the compiler's last error line when neither builds, or at once
    when it times out (one timeout, its process group ended)."""
    binary = workdir / "ceiling"
    err = ""
    cc_flags = list(compiler.get("cc_flags") or [])
    for flags in (NATIVE_FLAGS, PORTABLE_FLAGS):
        cmd = [compiler["path"], *cc_flags, *flags, "-o", str(binary), str(source)]
        try:
            proc = _run_group(cmd, COMPILE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise CeilingUnavailable(
                f"{compiler['path']} did not finish building {source.name} in "
                f"{COMPILE_TIMEOUT_S:g} s (its processes were ended)"
            ) from None
        except OSError as exc:
            err = str(exc)
            continue
        if proc.returncode == 0 and binary.is_file():
            return binary, [*cc_flags, *flags]
        err = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    raise CeilingUnavailable(f"{compiler['path']} could not build {source.name}: {err[:200]}")


def run_program(binary: Path, *args: object, timeout: float = RUN_TIMEOUT_S) -> dict:
    """One run of the compiled program: its JSON line; ``CeilingUnavailable`` if it fails."""
    try:
        proc = subprocess.run(
            [str(binary), *map(str, args)], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        why = f"{binary.name} {args[0]} timed out after {timeout:.0f} s"
        raise CeilingUnavailable(why) from None
    except OSError as exc:
        raise CeilingUnavailable(f"{binary.name} could not run: {exc}") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise CeilingUnavailable(f"{binary.name} {args[0]} failed: {last[:200]}")
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        raise CeilingUnavailable(f"unreadable output of {binary.name} {args[0]}") from None


def kernels_built(binary: Path) -> list[str]:
    """The kernels the compiler could build for this machine (``ceiling list``)."""
    proc = subprocess.run([str(binary), "list"], capture_output=True, text=True, timeout=30)
    return proc.stdout.split() if proc.returncode == 0 else []


def compute_rate(out: dict) -> dict:
    """One compute kernel's output (counts and seconds) as rates: the best repetition's GFLOP/s
    over all threads (their FLOP over its wall time, first start to last end), each thread's
    best GFLOP/s, each thread's clock and FLOP per cycle (its rate over its clock)."""
    flop_per_thread = float(out["iterations"]) * float(out["flop_per_iteration"])
    threads = int(out["threads"])
    reps = out["reps"]
    best = max(flop_per_thread * threads / r["wall_s"] for r in reps) / 1e9
    per_thread = [
        max(flop_per_thread / r["thread_s"][t] for r in reps) / 1e9 for t in range(threads)
    ]
    clocks = [float(c) for c in out.get("clock_ghz") or []]
    fpc = [g / c for g, c in zip(per_thread, clocks, strict=False) if c > 0]
    return {
        "gflops": best,
        "per_core_gflops": per_thread,
        "clock_ghz": clocks or None,
        "flop_per_cycle": sorted(fpc)[len(fpc) // 2] if fpc else None,  # the median thread's
        "flop_per_iteration": out["flop_per_iteration"],
        "threads": threads,
    }


def triad_rate(out: dict) -> float:
    """GB/s of the best triad repetition (STREAM's 24 bytes per element over its wall time)."""
    moved = float(out["elements"]) * float(out.get("bytes_per_element", TRIAD_BYTES_PER_ELEMENT))
    return max(moved / r["wall_s"] for r in out["reps"]) / 1e9


def llc_bytes(cpus: set[int] | None = None, root: Path = Path("/sys/devices/system/cpu")) -> int:
    """The last-level caches the usable cores reach, summed over distinct instances (a Zen part
    has one L3 per CCX); 0 when sysfs does not say."""
    cpus = cpus if cpus is not None else _usable_cpus()
    seen: dict[str, int] = {}
    for cpu in sorted(cpus):
        best_level, best = -1, None
        for idx in (root / f"cpu{cpu}" / "cache").glob("index*"):
            try:
                level = int((idx / "level").read_text())
                kind = (idx / "type").read_text().strip()
                size = _size_bytes((idx / "size").read_text())
                shared = (idx / "shared_cpu_list").read_text().strip()
            except (OSError, ValueError):
                continue
            if kind in ("Unified", "Data") and level > best_level:
                best_level, best = level, (shared, size)
        if best is not None:
            seen[best[0]] = best[1]
    return sum(seen.values())


def _size_bytes(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
    return int(text.rstrip("KMG")) * scale


def _usable_cpus() -> set[int]:
    try:
        return set(os.sched_getaffinity(0))
    except AttributeError:
        return set(range(os.cpu_count() or 1))


def triad_mib(llc: int) -> int:
    """MiB per triad array: four times the last-level caches (STREAM's rule), 64 at least."""
    return max(TRIAD_MIN_MIB, -(-4 * llc // 2**20))


def measure(threads: int, fallback_gflops: float | None = None, fallback_what: str = "") -> dict:
    """The ceilings for ``run.json``: fp32 and bf16 GFLOP/s, FLOP per cycle, the bandwidth, and
    how each was measured. Falls back to ``fallback_gflops`` (a matmul probe, described by
    ``fallback_what``) with the reason where the C kernels cannot run. Takes a few seconds."""
    compiler, why = find_compiler()
    if compiler is not None:
        try:
            with tempfile.TemporaryDirectory(prefix="rosetta-ceiling-") as tmp:
                binary, flags = build(compiler, Path(tmp))
                if not os.access(binary, os.X_OK) or _noexec(Path(tmp)):
                    raise CeilingUnavailable(
                        f"the temporary folder {Path(tmp).parent} does not allow running programs "
                        "(mounted noexec); set TMPDIR to a folder that does"
                    )
                return _measured(binary, threads, {**compiler, "flags": flags})
        except CeilingUnavailable as exc:
            why = str(exc)
        except PermissionError as exc:  # the program built but may not run here
            why = (f"the ceiling program could not run ({exc.strerror}): the temporary "
                   "folder may be mounted noexec; set TMPDIR to a folder that allows programs")
        except OSError as exc:
            why = f"the temporary folder for the ceiling program is unusable ({exc.strerror})"
    return fallback(threads, why, fallback_gflops, fallback_what)


def _noexec(folder: Path) -> bool:
    """Whether ``folder``'s file system is mounted ``noexec`` (``os.statvfs``'s ST_NOEXEC)."""
    try:
        return bool(os.statvfs(folder).f_flag & getattr(os, "ST_NOEXEC", 8))
    except OSError:
        return False


def _measured(binary: Path, threads: int, compiler: dict) -> dict:
    built = kernels_built(binary)
    fp32 = [k for k in FP32_KERNELS if k in built] or [k for k in (PORTABLE,) if k in built]
    bf16 = [k for k in BF16_KERNELS if k in built]
    if not fp32:
        raise CeilingUnavailable(f"the build has no fp32 kernel (it lists {built})")
    kernels = {
        k: compute_rate(run_program(binary, k, threads, COMPUTE_SECONDS, REPS)) for k in fp32 + bf16
    }
    llc = llc_bytes()
    mib = triad_mib(llc)
    triad = run_program(binary, "triad", threads, mib, REPS)
    return ceiling_record(
        kernels,
        triad_rate(triad),
        threads,
        method=FMA_KERNEL,
        compiler=compiler,
        bandwidth_how=f"C STREAM triad a = b + s*c, doubles, 3 arrays of {mib} MiB "
        f"(last-level caches {llc / 2**20:.0f} MiB), {threads} threads, 24 bytes per element "
        f"(the write-allocate read not counted), best of {REPS}",
    )


def ceiling_record(
    kernels: dict[str, dict],
    bandwidth_gbs: float | None,
    threads: int,
    method: str,
    compiler: dict | None = None,
    bandwidth_how: str = "",
    why: str = "",
) -> dict:
    """The record of the ceilings from each kernel's rates (:func:`compute_rate`): per precision
    the best kernel of that precision, or for bf16 without one the reason it is held to fp32."""
    out: dict = {
        "method": method,
        "why": why,
        "threads": threads,
        "source": {"file": SOURCE.name, "sha256": source_sha256()},
        "compiler": compiler,
        "kernels": kernels,
        "bandwidth": {"gbs": bandwidth_gbs, "how": bandwidth_how},
    }
    out["warning"] = busy_warning(kernels)
    for precision, names in (("fp32", FP32_KERNELS + (PORTABLE,)), ("bf16", BF16_KERNELS)):
        have = {k: kernels[k] for k in names if k in kernels}
        if have:
            k = max(have, key=lambda n: have[n]["gflops"])
            out[precision] = {"kernel": k, **have[k]}
        else:
            out[precision] = {
                "kernel": None,
                "gflops": None,
                "why": "no bf16 dot-product kernel on this target (VDPBF16PS needs avx512_bf16): "
                "bf16 is held to the fp32 ceiling",
            }
    return out


#: a core whose clock read below this fraction of the fastest reading of the same probe ran
#: beside other work (or throttled): the ceiling it gives is low
BUSY_CLOCK_FRACTION = 0.85


def busy_warning(kernels: dict[str, dict]) -> str:
    """One line where the probe's per-core clock readings (each kernel, each core) spread below
    :data:`BUSY_CLOCK_FRACTION` of their highest: the cores were shared while it ran (another
    process, a VM's neighbour), so its ceiling is low and every "of ceiling" high; else ``""``."""
    clocks = [c for k in kernels.values() for c in k.get("clock_ghz") or [] if c and c > 0]
    if not clocks or min(clocks) >= BUSY_CLOCK_FRACTION * max(clocks):
        return ""
    return (
        f"the ceiling probe's cores ran at {min(clocks):.2f} to {max(clocks):.2f} GHz: the machine "
        f"was busy (or throttled) while it ran, so the ceiling may read up to "
        f"{1 - min(clocks) / max(clocks):.0%} low; rerun on a quiet machine"
    )


def fallback(threads: int, why: str, gflops: float | None, what: str) -> dict:
    """The ceilings where no C kernel runs: the matmul probe's rate (stated as such, with why)
    and a one-thread NumPy triad."""
    rec = ceiling_record(
        {},
        numpy_triad_gbs(),
        threads,
        method=MATMUL_PROBE,
        bandwidth_how="NumPy triad on one thread (no C compiler), 24 bytes per element counted "
        "for two passes that move 40: a lower bound",
        why=why,
    )
    rec["source"] = None
    rec["fp32"] = {
        "kernel": None,
        "gflops": gflops,
        "what": what or "the best measured fp32 GEMM",
        "flop_per_cycle": None,
    }
    rec["bf16"]["why"] = "no C compiler: bf16 is held to the fp32 matmul probe"
    return rec


def numpy_triad_gbs(mib: int = TRIAD_MIN_MIB * 2, reps: int = REPS) -> float:
    """A NumPy triad ``a = b + s*c`` (two passes through ``a``), counted as STREAM counts."""
    import time

    import numpy as np

    n = mib * 2**20 // 8
    a, b, c = np.zeros(n), np.ones(n), np.full(n, 2.0)
    best = float("inf")
    for _ in range(reps + 1):
        t0 = time.perf_counter()
        np.multiply(c, 3.0, out=a)
        np.add(a, b, out=a)
        best = min(best, time.perf_counter() - t0)
    return n * TRIAD_BYTES_PER_ELEMENT / best / 1e9
